// Package certreload keeps TLS material read from files current: the chart mounts
// certificates from Secrets, whose volumes change in place when they are renewed,
// and a process must use the renewed files without a restart.
package certreload

import (
	"sync"
	"time"
)

// Value is what a load function reads from files, read again at most every
// interval when it is asked for. A failed read keeps the previous value: a Secret
// volume is swapped atomically, but an operator's file may be half written.
type Value[T any] struct {
	load     func() (T, error)
	interval time.Duration

	mu sync.Mutex
	v  T
	at time.Time // of the last read, failed or not
}

// Load reads the value a first time; its error is the caller's (files that are
// missing or bad at start are a configuration error, not a renewal in progress).
func Load[T any](interval time.Duration, load func() (T, error)) (*Value[T], error) {
	v, err := load()
	if err != nil {
		return nil, err
	}
	return &Value[T]{load: load, interval: interval, v: v, at: time.Now()}, nil
}

// Get returns the value, read again first when the last read is older than the
// interval. One caller reads per interval, even when the read fails; the others
// get the value held meanwhile.
func (r *Value[T]) Get() T {
	r.mu.Lock()
	v, stale := r.v, time.Since(r.at) > r.interval
	if stale {
		r.at = time.Now()
	}
	r.mu.Unlock()
	if !stale {
		return v
	}
	nv, err := r.load()
	if err != nil {
		return v
	}
	r.mu.Lock()
	r.v = nv
	r.mu.Unlock()
	return nv
}

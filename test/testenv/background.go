package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Background is a component's Run loop running on its own goroutine for a test.
type Background struct {
	what   string
	grace  time.Duration
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// RunBackground calls run with a context of its own on a new goroutine and stops it
// (Stop) when the test ends. what names the component in failures; grace is how long
// Stop waits for run to return.
func RunBackground(t testing.TB, what string, grace time.Duration, run func(context.Context) error) *Background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &Background{what: what, grace: grace, cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- run(ctx) }()
	t.Cleanup(func() { b.Stop(t) })
	return b
}

// Stop cancels run's context and waits for it to return; the test fails when run
// returned an error or did not return within the grace period. Later calls do nothing.
func (b *Background) Stop(t testing.TB) {
	t.Helper()
	b.once.Do(func() {
		b.cancel()
		select {
		case err := <-b.done:
			if err != nil {
				t.Errorf("%s: %v", b.what, err)
			}
		case <-time.After(b.grace):
			t.Errorf("%s did not stop within %s", b.what, b.grace)
		}
	})
}

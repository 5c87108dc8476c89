package certreload_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/certreload"
)

// counter is a load function that returns how many times it was called, or an
// error while fail is set.
type counter struct {
	mu    sync.Mutex
	calls int
	fail  bool
}

func (c *counter) load() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.fail {
		return 0, errors.New("half written")
	}
	return c.calls, nil
}

func TestLoadError(t *testing.T) {
	c := &counter{fail: true}
	if v, err := certreload.Load(time.Hour, c.load); err == nil || v != nil {
		t.Errorf("a failing first read: %v, %v; want the error", v, err)
	}
}

// Within the interval the held value is returned without a read.
func TestGetHeld(t *testing.T) {
	c := &counter{}
	v, err := certreload.Load(time.Hour, c.load)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := v.Get(); got != 1 {
			t.Errorf("Get = %d, want the first read's 1", got)
		}
	}
	if c.calls != 1 {
		t.Errorf("%d reads within the interval, want the first only", c.calls)
	}
}

// Past the interval, Get reads again; a failed read keeps the previous value.
func TestGetReload(t *testing.T) {
	c := &counter{}
	v, err := certreload.Load(time.Nanosecond, c.load)
	if err != nil {
		t.Fatal(err)
	}
	step := func(fail bool, want, calls int) {
		t.Helper()
		c.fail = fail
		time.Sleep(time.Millisecond) // past the interval
		if got := v.Get(); got != want || c.calls != calls {
			t.Errorf("Get = %d after %d reads, want %d after %d", got, c.calls, want, calls)
		}
	}
	step(false, 2, 2)
	step(true, 2, 3) // a failed read: the previous value stays
	step(false, 4, 4)
}

// Concurrent callers share one value (go test -race checks the locking).
func TestGetConcurrent(t *testing.T) {
	c := &counter{}
	v, err := certreload.Load(time.Nanosecond, c.load)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if got := v.Get(); got < 1 {
					t.Errorf("Get = %d", got)
				}
			}
		})
	}
	wg.Wait()
}

// Package eventually is the one polling helper of the project's tests: wait until a
// condition holds, or fail the test saying what was awaited and the last reason it did
// not hold. Tests use it instead of loops of their own.
package eventually

import (
	"fmt"
	"time"
)

// TB is the part of testing.TB the helper needs (testing.T and testing.B satisfy it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Interval is how often conditions are polled.
const Interval = 20 * time.Millisecond

// NoError polls f until it returns nil, and fails the test with f's last error once
// timeout has passed.
func NoError(t TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
			return // reached only with a TB whose Fatalf does not stop the goroutine
		}
		time.Sleep(Interval)
	}
}

// True polls cond until it returns true, and fails the test once timeout has passed.
func True(t TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	NoError(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("condition not met")
	})
}

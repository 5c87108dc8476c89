// Package eventually is the one polling helper of the project's tests: wait until a
// condition holds, or fail the test saying what was awaited and the last reason it did
// not hold. Tests use it instead of loops of their own; Wait serves code that must go
// on after a condition did not hold (the demo counts it as a failed outcome).
package eventually

import (
	"context"
	"fmt"
	"time"
)

// TB is the part of testing.TB the helper needs (testing.T and testing.B satisfy it,
// and so does test/testenv's TB).
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
	if err := Wait(context.Background(), timeout, f); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
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

// Wait polls f until it returns nil and returns nil, or returns f's last error once
// timeout has passed or ctx has ended.
func Wait(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (and %w)", err, ctx.Err())
		case <-time.After(Interval):
		}
	}
}

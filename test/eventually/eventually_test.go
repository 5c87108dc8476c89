package eventually

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder stands in for *testing.T so that a failing wait can be observed.
type recorder struct{ failed string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestNoErrorReturnsOnceConditionHolds(t *testing.T) {
	calls := 0
	r := &recorder{}
	NoError(r, time.Second, "third call", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if r.failed != "" || calls != 3 {
		t.Fatalf("failed=%q calls=%d, want no failure after 3 calls", r.failed, calls)
	}
}

func TestTimeoutNamesWhatAndLastError(t *testing.T) {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NoError(r, 50*time.Millisecond, "the widget", func() error { return errors.New("widget missing") })
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("NoError did not give up after its timeout")
	}
	if !strings.Contains(r.failed, "the widget") || !strings.Contains(r.failed, "widget missing") {
		t.Fatalf("failure message %q should name what was awaited and the last error", r.failed)
	}
}

func TestWaitReturnsLastErrorWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Wait(ctx, time.Minute, func() error {
		calls++
		if calls == 2 {
			cancel()
		}
		return fmt.Errorf("attempt %d", calls)
	})
	if err == nil || !strings.Contains(err.Error(), "attempt 2") || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v after %d calls, want the last attempt's error and context.Canceled", err, calls)
	}
}

package lokisource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"
)

func TestSlowAnswer(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: &timeoutErr{}}
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("loki query_range: decode: %w", io.ErrUnexpectedEOF), "eof"},
		{&url.Error{Op: "Post", URL: "http://loki", Err: io.EOF}, "eof"},
		{&url.Error{Op: "Post", URL: "http://loki", Err: syscall.ECONNRESET}, "eof"},
		{&url.Error{Op: "Post", URL: "http://loki", Err: context.DeadlineExceeded}, "timeout"},
		{timeout, "timeout"},
		{&statusError{code: http.StatusGatewayTimeout, body: "upstream request timeout"}, "status"},
		{&statusError{code: http.StatusServiceUnavailable, body: "context deadline exceeded"}, "status"},
		{&statusError{code: http.StatusInternalServerError, body: "too many outstanding requests"}, ""},
		{&statusError{code: http.StatusBadRequest, body: "parse error"}, ""},
		{&statusError{code: http.StatusUnauthorized}, ""},
		{&statusError{code: http.StatusForbidden}, ""},
		{&url.Error{Op: "Post", URL: "http://loki", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, ""},
		{errors.New("loki query_range: status \"error\""), ""},
	} {
		reason, ok := slowAnswer(context.Background(), tc.err)
		if reason != tc.reason || ok != (tc.reason != "") {
			t.Errorf("slowAnswer(%v) = %q, %v; want %q", tc.err, reason, ok, tc.reason)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := slowAnswer(ctx, io.ErrUnexpectedEOF); ok {
		t.Error("an error after the caller's cancellation shrinks the question")
	}
}

type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

func TestReadSize(t *testing.T) {
	const maxSpan, maxLimit = int64(time.Hour), 1000
	var z readSize
	if !z.init(maxSpan, maxLimit) || z.init(maxSpan, maxLimit) {
		t.Fatal("init sets the bounds once")
	}
	// The window halves from what was asked (10 s), not from the hour configured.
	if !z.shrink(int64(10*time.Second), maxLimit) || z.span != int64(5*time.Second) || z.limit != 500 {
		t.Fatalf("after one shrink: %+v", z)
	}
	for z.shrink(z.span, maxLimit) {
	}
	if z.span != minReadSpan || z.limit != minReadLimit {
		t.Fatalf("at the floors: %+v, want %s and %d", z, time.Duration(minReadSpan), minReadLimit)
	}
	changes := 0
	for range 1000 {
		if z.success(z.span, maxSpan, maxLimit) {
			changes++
		}
	}
	if z.span != maxSpan || z.limit != maxLimit {
		t.Fatalf("after successes: %+v, want the bounds back", z)
	}
	// 1s to 1h: 12 doublings (the last one capped), each after growAfter pages.
	if changes != 12 {
		t.Fatalf("grew %d times, want 12", changes)
	}
	// Windows of 10 s asked: once the window is longer than that, it goes back to
	// its bound (5 s, 10 s, 20 s, the bound).
	z.shrink(int64(10*time.Second), maxLimit)
	for range 3 * growAfter {
		z.success(min(z.span, int64(10*time.Second)), maxSpan, maxLimit)
	}
	if z.span != maxSpan {
		t.Fatalf("window %s after three growths from 5s with 10s asked, want %s", time.Duration(z.span), time.Duration(maxSpan))
	}
}

func TestPoller(t *testing.T) {
	const base = 2 * time.Second
	const quick = 10 * time.Millisecond // how long a poll took, unless said
	at := time.Unix(100, 0)
	p := newPoller(base, time.Second, at)
	poll := func(took time.Duration, r pollResult) bool {
		at = at.Add(p.interval)
		changed, _ := p.done(at, took, r)
		if p.from != at.UnixNano() {
			t.Fatalf("poll at %d recorded as at %d", at.UnixNano(), p.from)
		}
		return changed
	}
	missed := pollResult{polled: 1, missed: 1}
	// The tail delivered everything, the lines polls read first too.
	clean := pollResult{delivered: 1 << 20}
	// The tail delivering everything: the base, never longer.
	for range 3 * slowAfter {
		if poll(quick, clean) || p.interval != base {
			t.Fatalf("interval %s with the tail delivering everything, want %s", p.interval, base)
		}
	}
	// A line the tail missed: fastPoll at once, or half as long as the poll took.
	if !poll(quick, missed) || p.interval != fastPoll {
		t.Fatalf("after a line the tail missed: %s, want %s", p.interval, fastPoll)
	}
	if !poll(600*time.Millisecond, missed) || p.interval != 300*time.Millisecond {
		t.Fatalf("after a slow poll that found a line the tail missed: %s, want 300ms", p.interval)
	}
	poll(quick, missed)
	// A miss between clean polls starts the count again.
	for range slowAfter - 1 {
		poll(quick, clean)
	}
	poll(quick, missed)
	for range slowAfter - 1 {
		if poll(quick, clean) {
			t.Fatalf("interval changed to %s before %d clean polls in a row", p.interval, slowAfter)
		}
	}
	// Clean polls double it back, up to the base.
	poll(quick, clean)
	if p.interval != 2*fastPoll {
		t.Fatalf("after %d clean polls from %s: %s, want %s", slowAfter, fastPoll, p.interval, 2*fastPoll)
	}
	for range 10 * slowAfter {
		poll(quick, clean)
	}
	if p.interval != base {
		t.Fatalf("after many clean polls: %s, want %s", p.interval, base)
	}
	// While another path delivers the lines (Config.Backstop), a tail that drops
	// them leaves the base; once it stops, polls speed up again.
	pushed := true
	p.steady = func() bool { return pushed }
	for range 3 {
		if poll(quick, missed) || p.interval != base {
			t.Fatalf("a backstop's interval after a line the tail missed: %s, want %s", p.interval, base)
		}
	}
	pushed = false
	if !poll(quick, missed) || p.interval != fastPoll {
		t.Fatalf("after the push stopped: %s, want %s", p.interval, fastPoll)
	}
}

// A poll re-reads as much as its interval, at least fastMargin and at most
// lateMargin.
func TestPollerMargin(t *testing.T) {
	p := newPoller(2*time.Second, time.Second, time.Unix(100, 0))
	for _, c := range []struct{ interval, want time.Duration }{
		{2 * time.Second, 2 * time.Second},
		{fastPoll, fastMargin},
		{600 * time.Millisecond, 600 * time.Millisecond},
		{time.Minute, lateMargin},
	} {
		p.interval = c.interval
		if got := p.margin(); got != c.want {
			t.Errorf("interval %s: margin %s, want %s", c.interval, got, c.want)
		}
	}
}

// Lines a poll read before the tail delivered them are owed by the tail: delivered
// within the slack, the tail keeps up (the poll slows down); not delivered, the tail
// drops lines (the poll runs at fastPoll).
func TestPollerOwed(t *testing.T) {
	const slack = time.Second
	at := time.Unix(100, 0)
	p := newPoller(2*time.Second, slack, at)
	poll := func(d time.Duration, r pollResult) bool {
		at = at.Add(d)
		return p.dropped(at, r) > 0
	}
	// Read first, delivered by the tail before the next polls: paid.
	for range 3 * slowAfter {
		if poll(300*time.Millisecond, pollResult{polled: 40, delivered: 40}) {
			t.Fatal("the tail delivered every line a poll read first, yet dropping")
		}
	}
	if poll(300*time.Millisecond, pollResult{delivered: 40}) || len(p.owed) != 0 {
		t.Fatalf("every line paid, yet dropping or %d debts left", len(p.owed))
	}
	// Paid late, but within the slack.
	poll(300*time.Millisecond, pollResult{polled: 10})
	if poll(300*time.Millisecond, pollResult{}) || poll(300*time.Millisecond, pollResult{delivered: 10}) {
		t.Fatal("lines delivered within the slack counted as dropped")
	}
	// Partly paid: the rest is overdue once the slack has passed.
	poll(300*time.Millisecond, pollResult{polled: 10})
	if poll(300*time.Millisecond, pollResult{delivered: 9}) {
		t.Fatal("dropping before the slack passed")
	}
	at = at.Add(slack)
	if n := p.dropped(at, pollResult{}); n != 1 {
		t.Fatalf("a line a poll read first and the tail never delivered: %d dropped, want 1", n)
	}
	if len(p.owed) != 0 {
		t.Fatalf("%d debts left after they were settled", len(p.owed))
	}
	// A line the poll found older than the slack: dropped at once, and not owed.
	at = at.Add(300 * time.Millisecond)
	if n := p.dropped(at, pollResult{polled: 1, missed: 1}); n != 1 || len(p.owed) != 0 {
		t.Fatalf("a missed line: %d dropped, %d debts, want 1 and none", n, len(p.owed))
	}
	// The debts are bounded.
	for range 2 * maxOwed {
		poll(time.Millisecond, pollResult{polled: 1})
	}
	if len(p.owed) > maxOwed {
		t.Fatalf("%d debts kept, want at most %d", len(p.owed), maxOwed)
	}
}

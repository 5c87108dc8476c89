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
	const base, page = 2 * time.Second, 1000
	start := time.Unix(100, 0)
	p := newPoller(base, page, start)
	at := start
	// Nothing new, a page or more re-read: doubling after slowAfter such polls in
	// a row, up to 8 times the base.
	for _, want := range []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second} {
		before := p.interval
		for i := range slowAfter {
			at = at.Add(p.interval)
			p.done(at, 0, page)
			if i < slowAfter-1 && p.interval != before {
				t.Fatalf("interval %s after %d clean polls, want %s still", p.interval, i+1, before)
			}
		}
		if p.interval != want || p.from != at.UnixNano() {
			t.Fatalf("interval %s from %d, want %s from %d", p.interval, p.from, want, at.UnixNano())
		}
	}
	// A line the tail missed: back to the base at once.
	if !p.done(at.Add(p.interval), 1, page) || p.interval != base {
		t.Fatalf("after a missed line: %s, want %s", p.interval, base)
	}
	// A miss between clean polls starts the count again.
	for range slowAfter - 1 {
		p.done(at, 0, page)
	}
	p.done(at, 1, page)
	for range slowAfter - 1 {
		if p.done(at, 0, page) {
			t.Fatalf("interval changed to %s before %d clean polls in a row", p.interval, slowAfter)
		}
	}
	// Light load: stays at the base.
	if p.done(at.Add(2*p.interval), 0, page-1) || p.interval != base {
		t.Fatalf("light load: %s, want %s", p.interval, base)
	}
}

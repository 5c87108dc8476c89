package ship

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/test/eventually"
)

// senders returns both senders pointed at url.
func senders(url string, timeout time.Duration) []Sender {
	return []Sender{
		NewOTLP(url, OTLPOptions{Gzip: true, Timeout: timeout}),
		NewLoki(url, LokiOptions{Timeout: timeout}),
	}
}

func TestSendStatusClassification(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		status    int
		body      string
		retryable bool
		after     time.Duration
	}{
		{200, "", false, 0},
		{204, "", false, 0},
		{400, "entry for stream '{node=\"n1\"}' has timestamp too old", false, 0},
		{401, "no org id", false, 0},
		{403, "", false, 0},
		{404, "404 page not found", false, 0},
		{413, long, false, 0},
		{429, "Ingestion rate limit exceeded", true, 7 * time.Second},
		{500, "internal", true, 0},
		{502, "bad gateway", true, 0},
		{503, "unavailable", true, 2 * time.Second},
		{504, "", true, 0},
	} {
		hdr := map[string]string{}
		if tc.after > 0 {
			hdr["Retry-After"] = fmt.Sprint(int(tc.after / time.Second))
		}
		rc := newReceiver(t, reply{status: tc.status, body: tc.body, header: hdr})
		for _, s := range senders(rc.URL, 0) {
			err := s.Send(context.Background(), sampleRecords())
			if tc.status/100 == 2 {
				if err != nil {
					t.Errorf("%s %d: %v", s.Name(), tc.status, err)
				}
				continue
			}
			var he *HTTPError
			if !errors.As(err, &he) {
				t.Fatalf("%s %d: err = %T %v, want *HTTPError", s.Name(), tc.status, err, err)
			}
			if he.StatusCode != tc.status || !strings.HasPrefix(he.Status, fmt.Sprint(tc.status)) {
				t.Errorf("%s %d: status %d %q", s.Name(), tc.status, he.StatusCode, he.Status)
			}
			if Retryable(err) != tc.retryable {
				t.Errorf("%s %d: Retryable = %v, want %v", s.Name(), tc.status, Retryable(err), tc.retryable)
			}
			if he.RetryAfter != tc.after {
				t.Errorf("%s %d: RetryAfter %v, want %v", s.Name(), tc.status, he.RetryAfter, tc.after)
			}
			wantBody := tc.body
			if len(wantBody) > maxErrorBody {
				wantBody = wantBody[:maxErrorBody] + "…"
			}
			if he.Body != wantBody {
				t.Errorf("%s %d: body snippet %q (%d bytes), want %d bytes", s.Name(), tc.status, he.Body[:min(len(he.Body), 40)], len(he.Body), len(wantBody))
			}
			if !strings.Contains(err.Error(), fmt.Sprint(tc.status)) || (tc.body != "" && !strings.Contains(err.Error(), tc.body[:min(len(tc.body), 20)])) {
				t.Errorf("%s %d: message %q lacks status or body", s.Name(), tc.status, err.Error())
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0":                             0,
		"-1":                            0,
		"junk":                          0,
		"999999999999":                  24 * time.Hour,
		"Wed, 01 Jan 2025 00:00:10 GMT": 10 * time.Second,
		"Tue, 31 Dec 2024 23:59:00 GMT": 0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestSendNetworkErrorsAreRetryable(t *testing.T) {
	// Nothing listens on a port we just released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	for _, s := range senders(url, 0) {
		err := s.Send(context.Background(), sampleRecords())
		var ne *NetError
		if !errors.As(err, &ne) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: err = %T %v, want *NetError wrapping ECONNREFUSED", s.Name(), err, err)
		}
		if !Retryable(err) {
			t.Errorf("%s: connection refused not retryable", s.Name())
		}
	}
}

func TestSendAttemptTimeoutIsRetryable(t *testing.T) {
	rc := newReceiver(t, reply{status: 200, delay: 5 * time.Second})
	for _, s := range senders(rc.URL, 100*time.Millisecond) {
		start := time.Now()
		err := s.Send(context.Background(), sampleRecords())
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: attempt took %v despite a 100ms timeout", s.Name(), d)
		}
		var ne *NetError
		if !errors.As(err, &ne) || !Retryable(err) {
			t.Errorf("%s: err = %T %v, want a retryable *NetError", s.Name(), err, err)
		}
	}
}

func TestSendCallerContextIsNotRetryable(t *testing.T) {
	rc := newReceiver(t, reply{status: 200, delay: 5 * time.Second})
	for _, s := range senders(rc.URL, 0) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := s.Send(ctx, sampleRecords())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || Retryable(err) {
			t.Errorf("%s: err = %v (retryable %v), want a non-retryable DeadlineExceeded", s.Name(), err, Retryable(err))
		}
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		if err := s.Send(ctx, sampleRecords()); !errors.Is(err, context.Canceled) || Retryable(err) {
			t.Errorf("%s: canceled: err = %v", s.Name(), err)
		}
	}
}

func TestRetryable(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&HTTPError{StatusCode: 429}, true},
		{&HTTPError{StatusCode: 500}, true},
		{&HTTPError{StatusCode: 503}, true},
		{&HTTPError{StatusCode: 599}, true},
		{&HTTPError{StatusCode: 400}, false},
		{&HTTPError{StatusCode: 404}, false},
		{&HTTPError{StatusCode: 408}, false},
		{&HTTPError{StatusCode: 413}, false},
		{fmt.Errorf("wrapped: %w", &HTTPError{StatusCode: 502}), true},
		{&NetError{Err: opErr}, true},
		{&NetError{Err: context.DeadlineExceeded}, true}, // the attempt's own timeout
		{opErr, true},
		{io.ErrUnexpectedEOF, true},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("otlp: %w", context.Canceled), false},
		{&PartialSuccessError{Rejected: 1}, false},
		{errors.New("otlp: marshal: boom"), false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// retryEvent is one onRetry call.
type retryEvent struct {
	attempt int
	err     error
	wait    time.Duration
}

type retryLog struct {
	mu     sync.Mutex
	events []retryEvent
}

func (l *retryLog) hook(attempt int, err error, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, retryEvent{attempt, err, wait})
}

func (l *retryLog) get() []retryEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]retryEvent(nil), l.events...)
}

var fastBackoff = Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 2}

func TestRetry429ThenSuccess(t *testing.T) {
	for _, mk := range []func(string) Sender{
		func(u string) Sender { return NewOTLP(u, OTLPOptions{Gzip: true}) },
		func(u string) Sender { return NewLoki(u, LokiOptions{}) },
	} {
		rc := newReceiver(t, reply{status: 429, body: "slow down"}, reply{status: 200})
		s := mk(rc.URL)
		var log retryLog
		if err := Retry(context.Background(), s, sampleRecords(), fastBackoff, log.hook); err != nil {
			t.Fatalf("%s: Retry: %v", s.Name(), err)
		}
		ev := log.get()
		if len(ev) != 1 || ev[0].attempt != 1 {
			t.Fatalf("%s: onRetry calls %+v, want one for attempt 1", s.Name(), ev)
		}
		var he *HTTPError
		if !errors.As(ev[0].err, &he) || he.StatusCode != 429 {
			t.Errorf("%s: retried on %v, want the 429", s.Name(), ev[0].err)
		}
		if ev[0].wait < 0 || ev[0].wait > fastBackoff.Initial {
			t.Errorf("%s: first wait %v outside [0, %v]", s.Name(), ev[0].wait, fastBackoff.Initial)
		}
		reqs := rc.requests()
		if len(reqs) != 2 {
			t.Fatalf("%s: %d requests, want 2", s.Name(), len(reqs))
		}
		// The same records again (OTLP re-encodes with a new observed timestamp).
		for i, c := range reqs {
			var n int
			if strings.HasPrefix(s.Name(), "otlp") {
				n = decodeOTLP(t, c).LogRecordCount()
			} else {
				for _, st := range decodeLoki(t, c).Streams {
					n += len(st.Entries)
				}
			}
			if n != len(sampleRecords()) {
				t.Errorf("%s: request %d held %d records", s.Name(), i, n)
			}
		}
	}
}

func TestRetry400FailsAtOnce(t *testing.T) {
	rc := newReceiver(t, reply{status: 400, body: "error at least one label pair is required per stream"})
	for _, s := range senders(rc.URL, 0) {
		var log retryLog
		start := time.Now()
		err := Retry(context.Background(), s, sampleRecords(), Backoff{Initial: time.Second}, log.hook)
		var he *HTTPError
		if !errors.As(err, &he) || he.StatusCode != 400 || !strings.Contains(he.Body, "label pair") {
			t.Fatalf("%s: err = %v, want the 400 with its body", s.Name(), err)
		}
		if ev := log.get(); len(ev) != 0 {
			t.Errorf("%s: onRetry called %d times", s.Name(), len(ev))
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("%s: took %v", s.Name(), d)
		}
	}
	if n := len(rc.requests()); n != 2 {
		t.Errorf("%d requests, want one per sender", n)
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	rc := newReceiver(t, reply{status: 503, body: "down"})
	for _, s := range senders(rc.URL, 0) {
		ctx, cancel := context.WithCancel(context.Background())
		var log retryLog
		done := make(chan error, 1)
		go func() { done <- Retry(ctx, s, sampleRecords(), fastBackoff, log.hook) }()
		eventually.True(t, 5*time.Second, "3 retries", func() bool { return len(log.get()) >= 3 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) || Retryable(err) {
				t.Errorf("%s: err = %v, want context.Canceled", s.Name(), err)
			}
			if !strings.Contains(err.Error(), "503") {
				t.Errorf("%s: err %q does not name the last error", s.Name(), err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: Retry did not return after cancel", s.Name())
		}
		ev := log.get()
		if len(ev) < 3 {
			t.Fatalf("%s: %d retries before cancel", s.Name(), len(ev))
		}
		for i, e := range ev {
			if e.attempt != i+1 {
				t.Errorf("%s: retry %d reports attempt %d", s.Name(), i, e.attempt)
			}
		}
	}
	// A context that ends during the wait: Retry returns at once, not after the wait.
	s := NewLoki(rc.URL, LokiOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Retry(ctx, s, sampleRecords(), Backoff{Initial: time.Hour, Max: time.Hour}, func(int, error, time.Duration) {})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Retry returned %v after the deadline", d)
	}
}

// ceiling is the bound of the wait after the attempt-th failed attempt of a
// streak (1-based).
func ceiling(b Backoff, attempt int) time.Duration {
	c := b.ceilings()
	var d time.Duration
	for range max(attempt, 1) {
		d = c.Step()
	}
	return d
}

// delay draws the wait after the attempt-th failed attempt of a new streak.
func delay(b Backoff, attempt int) time.Duration {
	next := b.Delays()
	var d time.Duration
	for range max(attempt, 1) {
		d = next()
	}
	return d
}

func TestBackoffCeilingGrowsAndCaps(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, w := range want {
		if got := ceiling(b, i+1); got != w*time.Millisecond {
			t.Errorf("ceiling %d = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := ceiling(b, 10000); got != time.Second {
		t.Errorf("ceiling 10000 = %v (overflow?)", got)
	}
	var zero Backoff
	if ceiling(zero, 1) != DefaultInitialBackoff || ceiling(zero, 100) != DefaultMaxBackoff || ceiling(zero, 2) != 2*DefaultInitialBackoff {
		t.Errorf("zero Backoff ceilings %v %v %v", ceiling(zero, 1), ceiling(zero, 2), ceiling(zero, 100))
	}
	// Only Max set (what the command line does).
	if got := ceiling(Backoff{Max: 5 * time.Second}, 100); got != 5*time.Second {
		t.Errorf("Max-only ceiling %v", got)
	}
	if got := ceiling(Backoff{Initial: time.Second, Multiplier: 3}, 3); got != 9*time.Second {
		t.Errorf("multiplier 3: ceiling 3 = %v", got)
	}
}

func TestBackoffFullJitter(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2}
	const n = 4000
	for attempt := 1; attempt <= 6; attempt++ {
		c := ceiling(b, attempt)
		var sum time.Duration
		lo, hi := c, time.Duration(0)
		distinct := map[time.Duration]bool{}
		for range n {
			d := delay(b, attempt)
			if d < 0 || d > c {
				t.Fatalf("delay %d = %v outside [0, %v]", attempt, d, c)
			}
			sum += d
			lo, hi = min(lo, d), max(hi, d)
			distinct[d] = true
		}
		mean := sum / n
		// Uniform on [0, c]: mean c/2 (std error ≈ c/220 for n=4000), spread over the range.
		if mean < c*4/10 || mean > c*6/10 {
			t.Errorf("attempt %d: mean delay %v, want about %v", attempt, mean, c/2)
		}
		if lo > c/10 || hi < c*9/10 || len(distinct) < n/2 {
			t.Errorf("attempt %d: delays span [%v, %v] with %d distinct values: not jittered over [0, %v]", attempt, lo, hi, len(distinct), c)
		}
	}
}

// failing is a Sender that always fails with err, and cancels after n attempts.
type failing struct {
	err    error
	n      int
	cancel context.CancelFunc
	calls  int
}

func (f *failing) Name() string { return "failing" }
func (f *failing) Send(ctx context.Context, recs []Record) error {
	f.calls++
	if f.calls >= f.n {
		f.cancel()
	}
	return f.err
}

func TestRetryWaitsGrowWithinBounds(t *testing.T) {
	b := Backoff{Initial: time.Millisecond, Max: 16 * time.Millisecond, Multiplier: 2}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &failing{err: &NetError{Sender: "x", Err: syscall.ECONNRESET}, n: 12, cancel: cancel}
	var log retryLog
	err := Retry(ctx, f, nil, b, log.hook)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "after 12 attempts") {
		t.Fatalf("err = %v", err)
	}
	ev := log.get()
	if len(ev) != 11 {
		t.Fatalf("%d onRetry calls, want 11", len(ev))
	}
	for _, e := range ev {
		if c := ceiling(b, e.attempt); e.wait < 0 || e.wait > c {
			t.Errorf("attempt %d waited %v, outside [0, %v]", e.attempt, e.wait, c)
		}
		if !errors.Is(e.err, syscall.ECONNRESET) {
			t.Errorf("attempt %d: err %v", e.attempt, e.err)
		}
	}
}

func TestRetryHonorsRetryAfter(t *testing.T) {
	b := Backoff{Initial: time.Millisecond, Max: 80 * time.Millisecond}
	for _, tc := range []struct{ after, want time.Duration }{
		{50 * time.Millisecond, 50 * time.Millisecond},
		{time.Hour, 80 * time.Millisecond}, // capped at Max
	} {
		ctx, cancel := context.WithCancel(context.Background())
		f := &failing{err: &HTTPError{StatusCode: 429, RetryAfter: tc.after}, n: 2, cancel: cancel}
		var log retryLog
		start := time.Now()
		Retry(ctx, f, nil, b, log.hook)
		cancel()
		ev := log.get()
		if len(ev) != 1 || ev[0].wait != tc.want {
			t.Errorf("Retry-After %v: onRetry %+v, want one wait of %v", tc.after, ev, tc.want)
		}
		if d := time.Since(start); d < tc.want {
			t.Errorf("Retry-After %v: retried after %v", tc.after, d)
		}
	}
}

func TestRetryReturnsNonRetryableErrorAsIs(t *testing.T) {
	sentinel := errors.New("marshal failed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &failing{err: sentinel, n: 100, cancel: cancel}
	if err := Retry(ctx, f, nil, fastBackoff, nil); err != sentinel || f.calls != 1 {
		t.Errorf("err = %v after %d calls", err, f.calls)
	}
}

func TestTooLarge(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&HTTPError{StatusCode: 413}, true},
		{fmt.Errorf("wrapped: %w", &HTTPError{StatusCode: 413}), true},
		// The collector's answer to a body over max_request_body_size.
		{&HTTPError{StatusCode: 400, Body: "\b\x03\x12\x1chttp: request body too large"}, true},
		{&HTTPError{StatusCode: 400, Body: "entry too far behind"}, false},
		{&HTTPError{StatusCode: 500, Body: "request body too large"}, false},
		{&NetError{Err: io.EOF}, false},
	} {
		if got := TooLarge(tc.err); got != tc.want {
			t.Errorf("TooLarge(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

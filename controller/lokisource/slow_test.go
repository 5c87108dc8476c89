package lokisource

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// hiddenFromTail is a text the slowProxy keeps out of every tail.
const hiddenFromTail = "hidden from the tail"

// slowProxy stands in front of a real Loki: it answers the first cut catch-up
// query_range requests with a 200 whose body ends mid-answer (as Loki's write
// timeout does), the next delay ones only after the client gave up, and filters
// hiddenFromTail out of tails, so only the poll can read such a line.
type slowProxy struct {
	cut, delay int64
	n          atomic.Int64 // catch-up query_range requests seen
	srv        *httptest.Server
	// noCounts refuses metric queries (the audit's counts), as some gateways do.
	noCounts atomic.Bool
	refused  atomic.Int64 // metric queries refused
}

func newSlowProxy(t *testing.T, loki string, cut, delay int) *slowProxy {
	t.Helper()
	target, err := url.Parse(loki)
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{cut: int64(cut), delay: int64(delay)}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		if r.In.URL.Path == tailPath {
			q := r.Out.URL.Query()
			q.Set("query", q.Get("query")+` != "`+hiddenFromTail+`"`)
			r.Out.URL.RawQuery = q.Encode()
		}
	}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == queryRangePath && p.noCounts.Load() {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if strings.Contains(string(body), "count_over_time") {
				p.refused.Add(1)
				http.Error(w, "metric queries are not allowed here", http.StatusForbidden)
				return
			}
		}
		// Only the catch-up's pages (with the encoding flags), not the query check.
		if r.URL.Path != queryRangePath || r.Header.Get(encodingHeader) == "" {
			rp.ServeHTTP(w, r)
			return
		}
		switch n := p.n.Add(1); {
		case n <= p.cut:
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n"+`{"status":"success","data":{"resultType":"streams","result":[`)
			buf.Flush()
			conn.Close()
		case n <= p.cut+p.delay:
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			http.Error(w, "too late", http.StatusGatewayTimeout)
		default:
			p.forward(t, w, r, loki)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// forward answers a query_range with Loki's whole answer, read before it is sent.
func (p *slowProxy) forward(t *testing.T, w http.ResponseWriter, r *http.Request, loki string) {
	forwardWhole(t, w, r, loki, nil)
}

// forwardWhole answers r with loki's whole answer, read before it is sent and
// shown to seen first (when set).
func forwardWhole(t *testing.T, w http.ResponseWriter, r *http.Request, loki string, seen func(status int, body []byte)) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, loki+r.URL.RequestURI(), r.Body)
	if err != nil {
		t.Errorf("proxy: %v", err)
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Accept-Encoding")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if seen != nil {
		seen(resp.StatusCode, body)
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// testSlowCatchUp: catch-up pages cut off or too slow are asked again smaller;
// every line is still emitted once, in order, and the reader grows back.
func testSlowCatchUp(t *testing.T, loki string) {
	now := time.Now()
	var want []string
	var entries []push.Entry
	for i := range 30 {
		line := fmt.Sprintf("slow catch-up line %02d", i)
		want = append(want, line)
		entries = append(entries, push.Entry{Timestamp: now.Add(-3*time.Minute + time.Duration(i)*6*time.Second), Line: line})
	}
	pushOrFail(t, loki, push.Stream{Labels: `{source="kernel", node="n-slow"}`, Entries: entries})

	const maxLen, pageLimit = 2 * time.Minute, 400
	p := newSlowProxy(t, loki, 2, 2)
	r := run(t, Config{URL: p.srv.URL, QueryTimeout: time.Second, MaxQueryLength: maxLen, PageLimit: pageLimit,
		Queries: []Query{{Name: "kernel", LogQL: `{node="n-slow"}`}}}, StartAt(now.Add(-4*time.Minute)))
	r.waitFor(t, want...)
	var got []string
	for _, l := range r.lines() {
		got = append(got, l.Text)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted\n%q\nwant, once each and in order,\n%q", got, want)
	}
	if n := testutil.ToFloat64(r.m.shrinks.WithLabelValues("kernel", "eof")); n != 2 {
		t.Errorf("shrinks after a cut answer = %v, want 2", n)
	}
	if n := testutil.ToFloat64(r.m.shrinks.WithLabelValues("kernel", "timeout")); n != 2 {
		t.Errorf("shrinks after a timeout = %v, want 2", n)
	}
	if n := testutil.ToFloat64(r.m.reconnects.WithLabelValues("kernel", "error")); n != 0 {
		t.Errorf("reconnects after an error = %v, want 0 (each slow page was asked again smaller)", n)
	}
	eventually.True(t, 30*time.Second, "window and page grown back to the configured bounds", func() bool {
		return testutil.ToFloat64(r.m.window.WithLabelValues("kernel")) == maxLen.Seconds() &&
			testutil.ToFloat64(r.m.pageLimit.WithLabelValues("kernel")) == pageLimit
	})
}

// testPollReadsWhatTheTailMisses: lines the tail never delivers are read by the
// poll, a late one by the audit, and under load the poll runs at its base interval
// while the tail delivers everything, at fastPoll while it drops lines (the
// schedule itself is checked by TestPoller).
func testPollReadsWhatTheTailMisses(t *testing.T, loki string) {
	const stream, base = `{source="kernel", node="n-poll"}`, 300 * time.Millisecond
	p := newSlowProxy(t, loki, 0, 0)
	r := run(t, Config{URL: p.srv.URL, PollInterval: base, PageLimit: 200,
		Queries: []Query{{Name: "kernel", LogQL: `{node="n-poll"}`}}}, Checkpoint{})
	r.waitTail(t, loki, stream)

	pushLine(t, loki, stream, time.Now(), "a line "+hiddenFromTail)
	r.waitFor(t, "a line "+hiddenFromTail)

	// Late: older than lines already read, and never tailed.
	pushLine(t, loki, stream, time.Now(), "a newer tailed line")
	r.waitFor(t, "a newer tailed line")
	pushLine(t, loki, stream, time.Now().Add(-3*time.Second), "a late line "+hiddenFromTail)
	r.waitFor(t, "a late line "+hiddenFromTail)

	// Under load the tail delivers everything: the poll at its base.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	load := func(hidden bool) {
		defer wg.Done()
		for i := 0; ; i++ {
			var es []push.Entry
			for j := range 30 {
				line := fmt.Sprintf("load %d.%d", i, j)
				if hidden && j%3 == 0 {
					line += " " + hiddenFromTail
				}
				es = append(es, push.Entry{Timestamp: time.Now(), Line: line})
			}
			if err := testenv.PushLoki(loki, []push.Stream{{Labels: stream, Entries: es}}); err != nil {
				t.Errorf("push: %v", err)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	wg.Add(1)
	go load(false)
	interval := func() time.Duration {
		return time.Duration(testutil.ToFloat64(r.m.poll.WithLabelValues("kernel")) * float64(time.Second))
	}
	eventually.True(t, 30*time.Second, "poll interval at its base under load", func() bool { return interval() == base })
	pushed := time.Now()
	pushLine(t, loki, stream, pushed, "a line under load "+hiddenFromTail)
	r.waitFor(t, "a line under load "+hiddenFromTail)
	if d := time.Since(pushed); d > base+5*time.Second {
		t.Errorf("the line the tail missed took %s, want at most the poll interval %s and a few seconds", d, base)
	}
	close(stop)
	wg.Wait()

	// A tail that drops a third of the lines: the poll at fastPoll (as long as a
	// poll takes at most), and every line read.
	stop = make(chan struct{})
	wg.Add(1)
	go load(true)
	defer func() { close(stop); wg.Wait() }()
	eventually.True(t, 30*time.Second, "poll interval short while the tail drops lines", func() bool {
		return interval() < base && testutil.ToFloat64(r.m.missed.WithLabelValues("kernel")) > 0
	})
}

// testAuditWithoutCounts: where Loki's counts are refused (a gateway that allows
// only log queries), the audit reads the seconds again instead, so a late line the
// tail never delivers is still read, once.
func testAuditWithoutCounts(t *testing.T, loki string) {
	const stream = `{source="kernel", node="n-nocount"}`
	p := newSlowProxy(t, loki, 0, 0)
	p.noCounts.Store(true)
	r := run(t, Config{URL: p.srv.URL, PollInterval: 300 * time.Millisecond,
		Queries: []Query{{Name: "kernel", LogQL: `{node="n-nocount"}`}}}, Checkpoint{})
	r.waitTail(t, loki, stream)
	pushLine(t, loki, stream, time.Now(), "a newer tailed line")
	r.waitFor(t, "a newer tailed line")
	// Older than the poll's margin: only the audit reads it.
	pushLine(t, loki, stream, time.Now().Add(-2*time.Second), "a late line "+hiddenFromTail)
	r.waitFor(t, "a late line "+hiddenFromTail)
	if p.refused.Load() == 0 || testutil.ToFloat64(r.m.auditReads.WithLabelValues("kernel")) == 0 {
		t.Errorf("%d counts refused, %v seconds read again: want both above 0", p.refused.Load(), testutil.ToFloat64(r.m.auditReads.WithLabelValues("kernel")))
	}
}

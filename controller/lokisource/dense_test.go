package lokisource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
)

// statsProxy forwards to a real Loki and adds up, over the catch-up's query_range
// pages, the lines Loki says it processed to answer them, and the pages it refused.
type statsProxy struct {
	pages, processed, refused atomic.Int64
	srv                       *httptest.Server
}

func newStatsProxy(t *testing.T, loki string) *statsProxy {
	t.Helper()
	target, err := url.Parse(loki)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }} // the tail too
	p := &statsProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != queryRangePath || r.Header.Get(encodingHeader) == "" {
			rp.ServeHTTP(w, r)
			return
		}
		forwardWhole(t, w, r, loki, func(status int, body []byte) {
			if status != http.StatusOK {
				p.refused.Add(1)
				return
			}
			var st struct {
				Data struct {
					Stats struct {
						Summary struct {
							TotalLinesProcessed int64 `json:"totalLinesProcessed"`
						} `json:"summary"`
					} `json:"stats"`
				} `json:"data"`
			}
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&st); err != nil {
				t.Errorf("proxy: stats: %v", err)
			}
			p.pages.Add(1)
			p.processed.Add(st.Data.Stats.Summary.TotalLinesProcessed)
		})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// testDenseCatchUp: a catch-up over a dense stretch (far more lines than a page,
// in many streams, beside lines the filter drops) asks for windows that fit about
// a page, so Loki processes each line a few times at most, not once per page.
func testDenseCatchUp(t *testing.T, loki string) {
	const streams, perStream, pageLimit = 40, 60, 100
	start := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	var want []string
	for i := range streams {
		var es []push.Entry
		for j := range perStream {
			at := start.Add(time.Duration(j)*time.Second + time.Duration(i)*10*time.Millisecond)
			line := fmt.Sprintf("dense %03d.%02d", j, i)
			es = append(es, push.Entry{Timestamp: at, Line: line},
				push.Entry{Timestamp: at.Add(time.Millisecond), Line: fmt.Sprintf("benign %03d.%02d", j, i)})
		}
		pushOrFail(t, loki, push.Stream{Labels: fmt.Sprintf(`{test="dense", node="n-dense-%02d"}`, i), Entries: es})
	}
	for j := range perStream {
		for i := range streams {
			want = append(want, fmt.Sprintf("dense %03d.%02d", j, i))
		}
	}

	p := newStatsProxy(t, loki)
	r := run(t, Config{URL: p.srv.URL, PageLimit: pageLimit,
		Queries: []Query{{Name: "kernel", LogQL: `{test="dense"} |= "dense"`}}}, StartAt(start))
	r.waitFor(t, want...)
	var got []string
	for _, l := range r.lines() {
		got = append(got, l.Text)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted %d lines, want %d once each and in order", len(got), len(want))
	}
	total := int64(2 * streams * perStream) // the lines of the selected streams
	pages, processed := p.pages.Load(), p.processed.Load()
	t.Logf("%d pages; Loki processed %d lines for %d matching of %d selected", pages, processed, len(want), total)
	if processed > 4*total {
		t.Errorf("Loki processed %d lines over %d pages, more than 4 times the %d selected", processed, pages, total)
	}
}

// testPageOverLokisLimit: pages of the default size on a Loki whose
// max_entries_limit_per_query is lower: the first page is refused, asked again at
// Loki's limit, and every later page asks for no more.
func testPageOverLokisLimit(t *testing.T, loki string) {
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	var es []push.Entry
	var want []string
	for i := range 3*testMaxEntries + 50 {
		line := fmt.Sprintf("limited %04d", i)
		want = append(want, line)
		es = append(es, push.Entry{Timestamp: start.Add(time.Duration(i) * time.Millisecond), Line: line})
	}
	pushOrFail(t, loki, push.Stream{Labels: `{test="limited", node="n-limited"}`, Entries: es})
	p := newStatsProxy(t, loki)
	r := run(t, Config{URL: p.srv.URL, Queries: []Query{{Name: "kernel", LogQL: `{test="limited"}`}}}, StartAt(start))
	r.waitFor(t, want...)
	if got := r.lines(); len(got) != len(want) || got[0].Text != want[0] || got[len(got)-1].Text != want[len(want)-1] {
		t.Fatalf("emitted %d lines, want %d in order", len(got), len(want))
	}
	if n := p.refused.Load(); n != 1 {
		t.Errorf("Loki refused %d pages, want 1 (the first; later pages ask for its limit)", n)
	}
	if n := p.pages.Load(); n < 4 {
		t.Errorf("%d pages answered, want at least 4 of %d lines", n, testMaxEntries)
	}
	if c := r.src.pageCap.Load(); c != testMaxEntries {
		t.Errorf("page cap %d, want Loki's %d", c, testMaxEntries)
	}
}

package lokisource

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
)

// testCountBuckets: Loki's counts per bucket and the window's agree, at the
// buckets' edges too (a bucket holds its end, not its start), and a line filter
// counts only the lines it selects.
func testCountBuckets(t *testing.T, loki string) {
	const step = 200 * time.Millisecond
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	offsets := []time.Duration{0, 1, step - 1, step, step + 1, 3 * step, 3*step + time.Microsecond, 5*step - 1, 5 * step, 6 * step}
	var entries []push.Entry
	w := newWindow(start.Add(-time.Hour).UnixNano(), time.Hour, 1000)
	for i, off := range offsets {
		at := start.Add(off)
		entries = append(entries, push.Entry{Timestamp: at, Line: fmt.Sprintf("counted %d", i)}, push.Entry{Timestamp: at, Line: fmt.Sprintf("other %d", i)})
		w.add(entryKey("s", "", at.UnixNano(), fmt.Sprint(i)), at.UnixNano(), time.Now().UnixNano())
	}
	pushOrFail(t, loki, push.Stream{Labels: `{source="kernel", node="n-count"}`, Entries: entries})
	src, err := New(Config{URL: loki, Queries: []Query{{Name: "kernel", LogQL: `{node="n-count"}`}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	got, err := src.countBuckets(context.Background(), `{node="n-count"} |= "counted"`, start.UnixNano(), step, n)
	if err != nil {
		t.Fatal(err)
	}
	// (start, start+step]: 1, step-1, step; (step, 2step]: step+1; (2step, 3step]:
	// 3step; (3step, 4step]: 3step+1µs; (4step, 5step]: 5step-1, 5step; (5step,
	// 6step]: 6step. Not the line at start.
	want := []int64{3, 1, 1, 1, 2, 1}
	if !slices.Equal(got, want) {
		t.Errorf("Loki counts %v, want %v", got, want)
	}
	if mine := w.countBuckets(start.UnixNano(), step, n); !slices.Equal(mine, want) {
		t.Errorf("window counts %v, want %v", mine, want)
	}
}

// Audits count whole steps, each once, in order and without a gap, each once it
// ended lateMargin ago and a poll read past it, from lateMargin before the start on.
func TestAuditor(t *testing.T) {
	step := int64(auditStep)
	start := time.Unix(100, 300)
	a := newAuditor(start)
	at := start
	next := (start.UnixNano()-int64(lateMargin))/step*step - step // the first step not counted yet
	audits := 0
	for range 40 {
		at = at.Add(300 * time.Millisecond)
		a.polled.Store(at.UnixNano())
		from, n, due := a.due(at)
		if !due {
			if at.UnixNano()-int64(lateMargin) >= next+step {
				t.Fatalf("no audit at %s, but the step from %d ended lateMargin before", at, next)
			}
			continue
		}
		end := from + int64(n)*step
		if from != next || from%step != 0 || end > at.UnixNano()-int64(lateMargin) || end+step <= at.UnixNano()-int64(lateMargin) {
			t.Fatalf("audit at %s of (%d, %d], want from %d to the last whole step ended lateMargin before", at, from, end, next)
		}
		audits++
		a.done(end)
		next = end
	}
	if audits < 10 {
		t.Errorf("%d audits in 12 s, want about one a second", audits)
	}
	// Not past where the last poll started: the poll reads that first.
	polled := (at.UnixNano() - int64(lateMargin) + 3*step) / step * step
	a.polled.Store(polled + step/2)
	if _, n, due := a.due(at.Add(time.Minute)); !due || a.audited+int64(n)*step != polled {
		t.Errorf("audit a minute later, polls until %d: %d steps from %d, want up to %d", polled+step/2, n, a.audited, polled)
	}
	// After an hour without an audit: at most maxAuditSteps.
	a.polled.Store(at.Add(time.Hour).UnixNano())
	if _, n, due := a.due(at.Add(time.Hour)); !due || n != maxAuditSteps {
		t.Errorf("audit after an hour: %d steps (due %v), want %d", n, due, maxAuditSteps)
	}
}

package correlate_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules/correlate"
	"github.com/faultline-dev/faultline/test/liveheap"
	"github.com/faultline-dev/faultline/test/packengine"
)

// TestPruneForgetsOnlyTheOld: of two rules waiting in one stream, Prune forgets
// the one whose line is past the horizon and keeps the other.
func TestPruneForgetsOnlyTheOld(t *testing.T) {
	c, feed := feeder(engine(t, pack), "n1")
	feed(0, "alpha ready")
	feed(50*time.Minute, "beta ready")
	c.Prune(feedStart.Add(time.Hour), 30*time.Minute)
	if o := feed(61*time.Minute, "alpha fault"); len(o) != 0 {
		t.Fatalf("a line pruned was still joined: %+v", o)
	}
	if o := feed(61*time.Minute, "beta fault"); len(o) != 1 || !o[0].Fired || len(o[0].Evidence) != 2 {
		t.Fatalf("the line kept was not joined: %+v", o)
	}
}

// TestWaitingLinesShareTheirText: lines that wait (a companion before its
// primary) keep one copy of a text that many nodes print, not one each, so what a
// fleet's waiting lines cost follows the lines, not their length.
func TestWaitingLinesShareTheirText(t *testing.T) {
	e := engine(t, pack)
	c := correlate.NewShared()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const nodes, perNode, textLen = 500, 4, 1024
	text := "alpha ready " + strings.Repeat("x", textLen-len("alpha ready "))
	hits := e.Match(&logstream.Line{Text: text}, nil)
	if len(hits) != 1 {
		t.Fatalf("hits = %d", len(hits))
	}
	names := make([]string, nodes)
	for i := range names {
		names[i] = "node-" + strings.Repeat("n", i%7) + string(rune('a'+i%26))
	}
	before := liveheap.Bytes()
	for i := range nodes {
		for j := range perNode {
			// Each line decoded on its own, as the intake or a file read gives them.
			c.Observe(correlate.Key{Node: names[i] + string(rune('0'+i/26)), Stream: "kernel"},
				base.Add(time.Duration(j)*time.Second), strings.Clone(text), hits, nil)
		}
	}
	per := float64(liveheap.Bytes()-before) / (nodes * perNode)
	runtime.KeepAlive(c)
	t.Logf("%d waiting lines of %d bytes: %.0f bytes each", nodes*perNode, textLen, per)
	if per > textLen/4 {
		t.Errorf("each waiting line holds %.0f bytes: its %d-byte text is not shared", per, textLen)
	}
}

// BenchmarkFleetWaitingLines reports what the correlator holds for the background
// of `make bench-scale` (20,000 nodes; of every four candidate lines three are a
// port's link-up, which waits as link-flap's companion, and one a corrected AER
// error, which counts toward the storm rule), 200,000 lines with the default packs:
// live bytes per line once they are all in, for the controller's correlator
// (NewShared) and, in the same run, for one that keeps a copy of each line (New).
func BenchmarkFleetWaitingLines(b *testing.B) {
	e, err := packengine.Engine()
	if err != nil {
		b.Fatal(err)
	}
	const nodes, lines = 20000, 200000
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("kwok-node-%d", i)
	}
	text := func(i int) string {
		if i%4 == 0 {
			return fmt.Sprintf("pcieport 0000:00:02.0: AER: Corrected error received: 0000:00:02.%d", i%8)
		}
		return fmt.Sprintf("mlx5_core 0000:b5:00.0 ens6f%d: Link up", i%4)
	}
	for i := range 1000 { // the engine's lazily compiled regexes, before measuring
		e.Match(&logstream.Line{Text: text(i), Source: "kernel"}, nil)
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	held := func(c *correlate.Correlator) float64 {
		before := int64(liveheap.Bytes())
		for i := range lines {
			l := text(i) // each line a string of its own, as decoded
			hits := e.Match(&logstream.Line{Text: l, Source: "kernel"}, nil)
			c.Observe(correlate.Key{Node: names[i%nodes], Stream: "kernel"}, base.Add(time.Duration(i)*500*time.Microsecond), l, hits, nil)
		}
		n := float64(int64(liveheap.Bytes())-before) / lines
		runtime.KeepAlive(c)
		return n
	}
	for b.Loop() {
		shared, copied := held(correlate.NewShared()), held(correlate.New())
		b.ReportMetric(shared, "shared-B/line")
		b.ReportMetric(copied, "copied-B/line")
		b.ReportMetric(copied/shared, "copied/shared")
	}
}

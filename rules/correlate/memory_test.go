package correlate_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules/correlate"
)

const twoWaits = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: w}
spec:
  defaults: {severity: warning, action: taint}
  rules:
    - id: alpha
      match:
        regex: 'alpha fault'
        companion: {regex: 'alpha ready', position: before, within: {duration: 2h}}
    - id: beta
      match:
        regex: 'beta fault'
        companion: {regex: 'beta ready', position: before, within: {duration: 2h}}
`

// TestPruneForgetsOnlyTheOld: of two rules waiting in one stream, Prune forgets
// the one whose line is past the horizon and keeps the other.
func TestPruneForgetsOnlyTheOld(t *testing.T) {
	e := engine(t, twoWaits)
	c := correlate.New()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	k := correlate.Key{Node: "n1", Stream: "kernel"}
	feed := func(at time.Duration, text string) []correlate.Outcome {
		return c.Observe(k, base.Add(at), text, e.Match(&logstream.Line{Text: text}, nil), nil)
	}
	feed(0, "alpha ready")
	feed(50*time.Minute, "beta ready")
	c.Prune(base.Add(time.Hour), 30*time.Minute)
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
	e := engine(t, twoWaits)
	c := correlate.New()
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
	before := liveHeap()
	for i := range nodes {
		for j := range perNode {
			// Each line decoded on its own, as the intake or a file read gives them.
			c.Observe(correlate.Key{Node: names[i] + string(rune('0'+i/26)), Stream: "kernel"},
				base.Add(time.Duration(j)*time.Second), strings.Clone(text), hits, nil)
		}
	}
	per := float64(liveHeap()-before) / (nodes * perNode)
	runtime.KeepAlive(c)
	t.Logf("%d waiting lines of %d bytes: %.0f bytes each", nodes*perNode, textLen, per)
	if per > textLen/4 {
		t.Errorf("each waiting line holds %.0f bytes: its %d-byte text is not shared", per, textLen)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

package match

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/liveheap"
)

// TestStageKeepsLinesShared: the controller's stage keeps the lines it counts with
// one copy of each distinct text (correlate.NewShared), so a fleet's counted lines
// cost what their number does, not their length.
func TestStageKeepsLinesShared(t *testing.T) {
	e := engine(t)
	s := New(func() *rules.Engine { return e })
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const nodes, perNode, textLen = 500, 2, 1024 // below flap's threshold of 3: all kept
	text := "eth0: Link down " + strings.Repeat("x", textLen-len("eth0: Link down "))
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("gpu-%d", i)
	}
	before := liveheap.Bytes()
	for j := range perNode {
		for _, n := range names {
			// Each line decoded on its own, as the intake gives them.
			r := s.Process(logstream.Line{Node: n, Source: logstream.SourceKernel, Stream: "kernel",
				Time: t0.Add(time.Duration(j) * time.Second), Text: strings.Clone(text)})
			if len(r.Matches) != 1 || len(r.Faults) != 0 {
				t.Fatalf("line %d of %s: %+v", j, n, r)
			}
		}
	}
	per := float64(liveheap.Bytes()-before) / (nodes * perNode)
	runtime.KeepAlive(s)
	t.Logf("%d counted lines of %d bytes: %.0f bytes each", nodes*perNode, textLen, per)
	if per > textLen/4 {
		t.Errorf("each counted line holds %.0f bytes: its %d-byte text is not shared", per, textLen)
	}
}

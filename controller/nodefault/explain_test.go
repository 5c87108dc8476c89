package nodefault_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// xidRule compiles a pack with one taint rule on Xid 79 (regex, where condition).
func xidRule(t *testing.T) *rules.Compiled {
	t.Helper()
	ps, err := rules.Loader{}.ParseFile("x.yaml", []byte(`apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: nvidia-xid}
spec:
  defaults: {severity: critical, action: taint}
  rules:
    - id: xid-gpu-lost
      source: kernel
      match:
        regex: 'NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+), .*fallen off the bus'
        where: {xid: {in: [79]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := set.Rule("nvidia-xid", "xid-gpu-lost")
	if r == nil {
		t.Fatal("rule not compiled")
	}
	return r
}

const (
	lostLine  = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	otherLine = "NVRM: Xid (PCI:0000:3b:00): 13, pid=48213, name=python3, Graphics Exception: ESR 0x504648=0x11f000e"
)

// TestExplainingRecord: three firings of a rule keep the first line and the newest
// ones in the evidence (with the count of those left out), count three firings
// whether the decision, the ladder or both write them, and a match count of the
// last firing.
func TestExplainingRecord(t *testing.T) {
	env, ctx := withNodeFaults(t, 2*time.Minute)
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, err := nodefault.New(env.Clientset(), nodefault.Options{MaxLines: 4, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := xidRule(t)
	var lines []logstream.Line
	firing := func(i int) fault.Fault {
		// Each firing brings three lines of its own: more than MaxLines in all.
		var ev []logstream.Line
		for j := range 3 {
			l := logstream.Line{Time: clk.Now().Add(time.Duration(j) * time.Second), Text: fmt.Sprintf("%s #%d.%d", lostLine, i, j)}
			ev = append(ev, l)
			lines = append(lines, l)
		}
		return fault.Fault{Node: "gpu-3", Rule: r, Count: 1, Time: ev[2].Time, Evidence: ev}
	}
	// 1: the taint decision and the ladder's firing write the same firing.
	f1 := firing(1)
	if _, err := st.Record(ctx, "", "", "", nodefault.Change{Fault: &f1, Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint, Decision: "taint", LadderCounts: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Record(ctx, "", "", "", nodefault.Change{Fault: &f1, Firing: true}); err != nil {
		t.Fatal(err)
	}
	// 2: a repeat whose decision write was skipped (recent): the ladder's alone.
	clk.Add(time.Minute)
	f2 := firing(2)
	if _, err := st.Record(ctx, "", "", "", nodefault.Change{Fault: &f2, Firing: true}); err != nil {
		t.Fatal(err)
	}
	// 3: a rule without a ladder: the decision's write counts.
	clk.Add(time.Minute)
	f3 := firing(3)
	f3.Count = 3
	nf, err := st.Record(ctx, "", "", "", nodefault.Change{Fault: &f3, Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint, Decision: "already-tainted"})
	if err != nil {
		t.Fatal(err)
	}
	got := nf.Status
	if got.Firings != 3 || got.Count != 3 {
		t.Errorf("firings %d, count %d; want 3 firings, count 3 (the last firing's)", got.Firings, got.Count)
	}
	var texts []string
	for _, l := range got.Evidence {
		texts = append(texts, strings.TrimPrefix(l.Text, lostLine+" "))
	}
	// 9 lines, 4 kept: the first two (the taint's) and the newest two.
	if want := []string{"#1.0", "#1.1", "#3.1", "#3.2"}; !slices.Equal(texts, want) || got.EvidenceOmitted != 5 {
		t.Errorf("evidence %q (%d left out), want %q (5 left out)", texts, got.EvidenceOmitted, want)
	}
	// A firing writing lines the record holds (its threshold window's) adds none.
	clk.Add(time.Minute)
	f4 := f3
	f4.Evidence = f3.Evidence[1:]
	nf, err = st.Record(ctx, "", "", "", nodefault.Change{Fault: &f4, Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint})
	if err != nil {
		t.Fatal(err)
	}
	if len(nf.Status.Evidence) != 4 || nf.Status.EvidenceOmitted != 5 {
		t.Errorf("repeated lines added again: %+v (%d left out)", nf.Status.Evidence, nf.Status.EvidenceOmitted)
	}
}

// TestRuleQueryInLoki: the record's query, run by Loki, returns the rule's line of
// the node and neither another kernel line of the node nor the rule's line of
// another node.
func TestRuleQueryInLoki(t *testing.T) {
	testenv.Integration(t)
	env := testenv.Start(t, testenv.Options{Loki: true})
	r := xidRule(t)
	q := nodefault.RuleQuery(r, logstream.LabelNode, "gpu-3")
	if !strings.HasPrefix(q, `{source="kernel"} | node="gpu-3" |~ `) {
		t.Fatalf("query %s", q)
	}
	now := time.Now()
	stream := func(node string, lines ...string) push.Stream {
		s := push.Stream{Labels: fmt.Sprintf(`{source="kernel", node=%q}`, node)}
		for i, l := range lines {
			s.Entries = append(s.Entries, push.Entry{Timestamp: now.Add(time.Duration(i) * time.Millisecond), Line: l})
		}
		return s
	}
	if err := testenv.PushLoki(env.LokiURL(), []push.Stream{
		stream("gpu-3", otherLine, lostLine, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module"),
		stream("gpu-4", lostLine),
	}); err != nil {
		t.Fatal(err)
	}
	// Loki answers once every line is in (the other streams' queries).
	testenv.WaitLoki(t, env.LokiURL(), `{source="kernel"}`, 4, 30*time.Second)
	eventually.NoError(t, 30*time.Second, "the rule's line from "+q, func() error {
		got, err := testenv.QueryLoki(t.Context(), env.LokiURL(), q, now.Add(-time.Minute), now.Add(time.Minute))
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].Line != lostLine {
			return fmt.Errorf("query %s returned %+v, want only %q", q, got, lostLine)
		}
		return nil
	})
}

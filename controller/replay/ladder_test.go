package replay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// TestLadderStepHeldByTheStorm: a step that takes capacity passes the brakes as in
// the controller: while the rule's storm holds, the drain its repeat made due is
// held (hold:storm, step 1), and taken when the rule fires again after the storm.
func TestLadderStepHeldByTheStorm(t *testing.T) {
	t0 := time.Date(2026, 10, 1, 10, 0, 0, 0, time.UTC)
	r := &run{cfg: Config{ReconcileEvery: 10 * time.Second}, res: newResult(100), facts: Fleet{Eligible: 10}.facts(),
		taints: map[string]*taint{}, boots: map[string]string{}, lastMatch: map[string]time.Time{}, ladders: map[string]*ladder{}}
	dec, err := decide.New(decide.Config{MaxPercent: 100, Now: func() time.Time { return r.now }})
	if err != nil {
		t.Fatal(err)
	}
	r.dec = dec
	rule := &rules.Compiled{Pack: "xid", ID: "gpu-lost", Action: rules.ActionTaint, Severity: "critical",
		Escalate: []rules.Step{{Action: rules.StepDrain, Repeat: &rules.Threshold{Count: 1, Window: rules.Duration(time.Hour)}}}}
	fire := func(node string, at time.Duration) {
		t.Helper()
		r.now = t0.Add(at)
		f := fault.Fault{Node: node, Rule: rule, Count: 1, Time: r.now,
			Evidence: []logstream.Line{{Time: r.now, Text: "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
				Labels: map[string]string{logstream.MetaBootID: "boot-1"}}}}
		if err := r.apply(r.dec.Decide(f, r.facts)); err != nil {
			t.Fatal(err)
		}
	}
	fire("n0", 0)              // tainted
	fire("n1", time.Minute)    // tainted
	fire("n2", 2*time.Minute)  // the third node of ten: a storm, held
	fire("n0", 3*time.Minute)  // a repeat: the drain is due, but the storm holds it
	fire("n0", 40*time.Minute) // the storm is over: the drain is taken
	r.res.finish(r.dec.Held(), r.dec.Fleet().Faults())
	var got []string
	for _, a := range r.res.Actions {
		got = append(got, fmt.Sprintf("%s %s %s %s", a.Node, a.Outcome, a.Step, a.First.Sub(t0)))
	}
	want := "n0 escalate 1 drain 40m0s|n0 hold:storm 1 drain 3m0s|n0 taint - 0s|n1 taint - 1m0s|n2 hold:storm - 2m0s"
	if strings.Join(got, "|") != want {
		t.Errorf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.ReplaceAll(want, "|", "\n"))
	}
}

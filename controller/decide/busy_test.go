package decide_test

import (
	"testing"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

// TestUnconfirmedTaint: the unconfirmed taint of a busy node takes the taint's way
// (the budget counts it, a full one holds it) and climbs no ladder; the failure of
// its invasive checks confirms it as a taint, which climbs; without it on the node,
// the failure takes the taint path.
func TestUnconfirmedTaint(t *testing.T) {
	p := rule("pcie", rules.ActionProbe)
	p.Escalate = []rules.Step{{Action: rules.StepDrain}}
	d := newDecider(t, decide.Config{MaxNodes: 1}, newClock())
	none := decide.NodeFacts{Eligible: 20}
	awaiting := decide.ProbeResult{Outcome: decide.ProbesAwaitingIdle}
	failedAfterWait := decide.ProbeResult{Outcome: decide.ProbesFailed, AfterIdleWait: true}
	f := flt(node(0), p)
	d.Decide(f, none)
	dec := d.DecideProbe(f, awaiting, none)
	if dec.Kind != decide.KindTaint || !dec.Unconfirmed || decide.Laddered(dec) {
		t.Fatalf("DecideProbe(awaiting idle) = %v (unconfirmed %v, laddered %v)", dec, dec.Unconfirmed, decide.Laddered(dec))
	}
	// The budget of one node is used by the unconfirmed taint.
	g := flt(node(1), p)
	d.Decide(g, none)
	if dec := d.DecideProbe(g, awaiting, none); short(dec) != "hold:budget" || dec.Unconfirmed {
		t.Fatalf("a second unconfirmed taint over the budget: %v", dec)
	}
	// Its invasive checks failed: the same node, confirmed, no new budget.
	tainted := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(0): {"p/pcie"}}}
	if dec := d.DecideProbe(f, failedAfterWait, tainted); dec.Kind != decide.KindTaint || dec.Unconfirmed || !decide.Laddered(dec) {
		t.Fatalf("DecideProbe(failed after the wait) = %v", dec)
	}
	// whileBusy wait: no taint on the node; a failure takes the taint path.
	h := flt(node(2), p)
	if dec := d.DecideProbe(h, failedAfterWait, tainted); short(dec) != "hold:budget" {
		t.Fatalf("DecideProbe(failed after the wait) without an unconfirmed taint, budget full: %v", dec)
	}
}

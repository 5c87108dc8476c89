package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

func ladder() []rules.Step {
	return []rules.Step{
		{Action: rules.StepDrain, Repeat: &rules.Threshold{Count: 2, Window: rules.Duration(time.Hour)}},
		{Action: rules.StepRemediate, Reboots: 1, Template: "snr"},
		{Action: rules.StepGPUReset, ProbeFailed: true},
		{Action: rules.StepService, TaintedFor: rules.Duration(24 * time.Hour)},
	}
}

// TestNextStep: each trigger makes its step due only when it holds, counting from
// the step before; a step not done is tried again first.
func TestNextStep(t *testing.T) {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	fire := func(d time.Duration, boot string) decide.Firing { return decide.Firing{Time: at(d), BootID: boot} }
	now := at(2 * time.Hour)
	for _, c := range []struct {
		name string
		l    decide.Ladder
		want int // step index due, -1 none
	}{
		{"one repeat is not two", decide.Ladder{Since: at(0), Firings: []decide.Firing{fire(time.Hour, "b1")}}, -1},
		{"two repeats within the hour", decide.Ladder{Since: at(0), Firings: []decide.Firing{fire(90*time.Minute, "b1"), fire(100*time.Minute, "b1")}}, 0},
		{"two repeats, one out of the window", decide.Ladder{Since: at(0), Firings: []decide.Firing{fire(30*time.Minute, "b1"), fire(100*time.Minute, "b1")}}, -1},
		{"firings before the taint do not count", decide.Ladder{Since: at(95 * time.Minute), Firings: []decide.Firing{fire(90*time.Minute, "b1"), fire(100*time.Minute, "b1")}}, -1},
		{"drain not done: tried again", decide.Ladder{Reached: 1, Since: at(time.Hour)}, 0},
		{"same boot: no reboot", decide.Ladder{Reached: 1, Done: true, Since: at(time.Hour), Firings: []decide.Firing{fire(0, "b1"), fire(110*time.Minute, "b1")}}, -1},
		{"again after a reboot", decide.Ladder{Reached: 1, Done: true, Since: at(time.Hour), Firings: []decide.Firing{fire(0, "b1"), fire(110*time.Minute, "b2")}}, 1},
		{"the reboot's firing is older than the step", decide.Ladder{Reached: 1, Done: true, Since: at(time.Hour), Firings: []decide.Firing{fire(0, "b1"), fire(50*time.Minute, "b2")}}, -1},
		{"probe failed before the step", decide.Ladder{Reached: 2, Done: true, Since: at(time.Hour), ProbeFailed: at(30 * time.Minute)}, -1},
		{"probe failed after the step", decide.Ladder{Reached: 2, Done: true, Since: at(time.Hour), ProbeFailed: at(90 * time.Minute)}, 2},
		{"tainted 2h of 24h", decide.Ladder{Reached: 3, Done: true, Since: at(time.Hour), TaintedSince: at(0)}, -1},
		{"tainted 25h", decide.Ladder{Reached: 3, Done: true, Since: at(time.Hour), TaintedSince: at(-23 * time.Hour)}, 3},
		{"untainted: no taintedFor", decide.Ladder{Reached: 3, Done: true, Since: at(time.Hour)}, -1},
		{"top of the ladder", decide.Ladder{Reached: 4, Done: true, Since: at(time.Hour), TaintedSince: at(-100 * time.Hour)}, -1},
	} {
		s, ok := decide.NextStep(ladder(), c.l, now)
		got := -1
		if ok {
			got = s.Index
		}
		if got != c.want {
			t.Errorf("%s: step %d due (%s), want %d", c.name, got, s.Why, c.want)
		}
		if ok && (s.Why == "" || s.Action != ladder()[got].Action) {
			t.Errorf("%s: step %+v lacks its reason or action", c.name, s)
		}
	}
}

// TestEscalateBrakes: a step that takes capacity is held by an opt-out, a storm or
// an exhausted budget; service is never held; a rule below enforce only records.
func TestEscalateBrakes(t *testing.T) {
	r := rule("xid", rules.ActionTaint)
	r.Escalate = ladder()
	drain := decide.Step{Index: 0, Step: r.Escalate[0], Why: "test"}
	service := decide.Step{Index: 3, Step: r.Escalate[3], Why: "test"}
	tainted := func(nodes ...int) map[string][]string {
		m := map[string][]string{}
		for _, n := range nodes {
			m[node(n)] = []string{r.String()}
		}
		return m
	}
	d := newDecider(t, decide.Config{MaxNodes: 2, MaxPercent: 100}, newClock())
	if dec := d.Escalate(flt(node(0), r), drain, decide.NodeFacts{Eligible: 10, Tainted: tainted(0)}); dec.Kind != decide.KindEscalate || dec.Step == nil || dec.Step.Index != 0 {
		t.Fatalf("drain of a tainted node within budget: %s", dec)
	}
	if dec := d.Escalate(flt(node(0), r), drain, decide.NodeFacts{Eligible: 10, Tainted: tainted(0), OptedOut: map[string]bool{node(0): true}}); dec.Kind != decide.KindHold || dec.Reason != decide.ReasonOptedOut {
		t.Errorf("drain of an opted-out node: %s", dec)
	}
	// A view over the budget (3 tainted of 2) holds the drain, not the service.
	over := decide.NodeFacts{Eligible: 10, Tainted: tainted(0, 1, 2)}
	if dec := d.Escalate(flt(node(0), r), drain, over); dec.Kind != decide.KindHold || dec.Reason != decide.ReasonBudget {
		t.Errorf("drain over the budget: %s", dec)
	}
	if dec := d.Escalate(flt(node(0), r), service, over); dec.Kind != decide.KindEscalate {
		t.Errorf("service over the budget: %s", dec)
	}
	// A storm of the rule holds its drains.
	s := newDecider(t, decide.Config{MaxPercent: 100, StormShare: 0.2, StormMinNodes: 3}, newClock())
	for i := range 4 {
		s.Decide(flt(node(i), r), decide.NodeFacts{Eligible: 10})
	}
	if dec := s.Escalate(flt(node(0), r), drain, decide.NodeFacts{Eligible: 10, Tainted: tainted(0)}); dec.Kind != decide.KindHold || dec.Reason != decide.ReasonStorm {
		t.Errorf("drain during a storm: %s", dec)
	}
	// Mode annotate records the step; dry-run says what it would do.
	a := modeRule("xid", rules.ActionTaint, rules.ModeAnnotate)
	if dec := d.Escalate(flt(node(0), a), drain, decide.NodeFacts{Eligible: 10}); dec.Kind != decide.KindAnnotate || !strings.Contains(dec.Message, "not taken") {
		t.Errorf("drain in mode annotate: %s", dec)
	}
	dry := newDecider(t, decide.Config{DryRun: true}, newClock())
	if dec := dry.Escalate(flt(node(0), r), drain, decide.NodeFacts{Eligible: 10, Tainted: tainted(0)}); dec.Kind != decide.KindDryRun || dec.Of != decide.KindEscalate {
		t.Errorf("drain in dry-run: %s", dec)
	}
}

// TestLadderBookkeeping: the first firing starts the climb, only the newest
// MaxFirings are kept, and a step reached again keeps the time it was first
// reached, as a fault's record keeps them.
func TestLadderBookkeeping(t *testing.T) {
	var l decide.Ladder
	for i := range decide.MaxFirings + 5 {
		l.Fire(decide.Firing{Time: t0.Add(time.Duration(i) * time.Minute), BootID: "b"})
	}
	if !l.Since.Equal(t0) || len(l.Firings) != decide.MaxFirings || !l.Firings[0].Time.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("since %s, %d firings from %s: want the first firing's time and the newest %d", l.Since, len(l.Firings), l.Firings[0].Time, decide.MaxFirings)
	}
	drain := decide.Step{Index: 0, Step: ladder()[0]}
	l.Reach(drain, false, t0.Add(time.Hour))
	l.Reach(drain, true, t0.Add(2*time.Hour))
	if l.Reached != 1 || !l.Done || !l.Since.Equal(t0.Add(time.Hour)) {
		t.Errorf("after a held then done drain: %+v, want step 1 done since its first attempt", l)
	}
	l.Fire(decide.Firing{Time: t0.Add(3 * time.Hour)})
	if !l.Since.Equal(t0.Add(time.Hour)) {
		t.Errorf("a firing after a step moved the climb's start to %s", l.Since)
	}
	if !decide.Laddered(decide.Decision{Kind: decide.KindAlreadyTainted, Fault: flt(node(0), &rules.Compiled{Escalate: ladder()})}) ||
		decide.Laddered(decide.Decision{Kind: decide.KindHold, Fault: flt(node(0), &rules.Compiled{Escalate: ladder()})}) ||
		decide.Laddered(decide.Decision{Kind: decide.KindTaint, Fault: flt(node(0), &rules.Compiled{})}) {
		t.Error("Laddered: want firings on a tainted node of a rule with a ladder only")
	}
}

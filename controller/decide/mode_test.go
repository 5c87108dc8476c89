package decide_test

import (
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

func modeRule(id string, action rules.Action, mode rules.Mode) *rules.Compiled {
	r := rule(id, action)
	r.Mode = mode
	return r
}

// TestModes: what each mode makes of each action, under each ceiling.
func TestModes(t *testing.T) {
	type row struct {
		action  rules.Action
		mode    rules.Mode
		ceiling rules.Mode
		want    decide.Kind
		acted   rules.Mode
	}
	rows := []row{
		{rules.ActionTaint, rules.ModeEnforce, "", decide.KindTaint, rules.ModeEnforce},
		{rules.ActionTaint, "", "", decide.KindTaint, rules.ModeEnforce}, // unset is enforce
		{rules.ActionTaint, rules.ModeAnnotate, "", decide.KindAnnotate, rules.ModeAnnotate},
		{rules.ActionTaint, rules.ModeObserve, "", decide.KindObserve, rules.ModeObserve},
		{rules.ActionProbe, rules.ModeEnforce, "", decide.KindProbe, rules.ModeEnforce},
		{rules.ActionProbe, rules.ModeAnnotate, "", decide.KindAnnotate, rules.ModeAnnotate},
		{rules.ActionProbe, rules.ModeObserve, "", decide.KindObserve, rules.ModeObserve},
		{rules.ActionEvent, rules.ModeEnforce, "", decide.KindEvent, rules.ModeEnforce},
		{rules.ActionEvent, rules.ModeAnnotate, "", decide.KindEvent, rules.ModeAnnotate},
		{rules.ActionEvent, rules.ModeObserve, "", decide.KindObserve, rules.ModeObserve},
		{rules.ActionNone, rules.ModeObserve, "", decide.KindNone, rules.ModeObserve},
		// The ceiling lowers, never raises.
		{rules.ActionTaint, rules.ModeEnforce, rules.ModeAnnotate, decide.KindAnnotate, rules.ModeAnnotate},
		{rules.ActionTaint, rules.ModeEnforce, rules.ModeObserve, decide.KindObserve, rules.ModeObserve},
		{rules.ActionProbe, rules.ModeAnnotate, rules.ModeObserve, decide.KindObserve, rules.ModeObserve},
		{rules.ActionTaint, rules.ModeObserve, rules.ModeEnforce, decide.KindObserve, rules.ModeObserve},
		{rules.ActionTaint, rules.ModeAnnotate, rules.ModeEnforce, decide.KindAnnotate, rules.ModeAnnotate},
	}
	for _, r := range rows {
		d := newDecider(t, decide.Config{MaxMode: r.ceiling}, newClock())
		dec := d.Decide(flt(node(0), modeRule("x", r.action, r.mode)), decide.NodeFacts{Eligible: 10})
		if dec.Kind != r.want || dec.Mode != r.acted {
			t.Errorf("action %s, mode %q, ceiling %q: %s in mode %s, want %s in mode %s (%s)",
				r.action, r.mode, r.ceiling, dec.Kind, dec.Mode, r.want, r.acted, dec.Message)
		}
		lowered := r.ceiling != "" && r.mode != "" && r.acted != r.mode
		if got := strings.Contains(dec.Message, "ceiling"); got != lowered {
			t.Errorf("action %s, mode %q, ceiling %q: message %q names the ceiling: %v, want %v",
				r.action, r.mode, r.ceiling, dec.Message, got, lowered)
		}
	}
	if _, err := decide.New(decide.Config{MaxMode: "enforcing"}); err == nil {
		t.Error("New accepted MaxMode enforcing")
	}
}

// TestModesTakeNoCapacity: firings below enforce use no budget and start no storm,
// so the first enforce firing after them is judged as if they never happened.
func TestModesTakeNoCapacity(t *testing.T) {
	d := newDecider(t, decide.Config{MaxNodes: 1, StormShare: 0.2, StormMinNodes: 3}, newClock())
	facts := decide.NodeFacts{Eligible: 10}
	r := modeRule("x", rules.ActionTaint, rules.ModeAnnotate)
	o := modeRule("y", rules.ActionProbe, rules.ModeObserve)
	for i := range 10 {
		if dec := d.Decide(flt(node(i), r), facts); dec.Kind != decide.KindAnnotate {
			t.Fatalf("annotate firing %d: %s", i, short(dec))
		}
		if dec := d.Decide(flt(node(i), o), facts); dec.Kind != decide.KindObserve {
			t.Fatalf("observe firing %d: %s", i, short(dec))
		}
	}
	st := d.Stats()
	if st.PendingTaints != 0 || st.StormsStarted != 0 || len(st.Holds) != 0 {
		t.Fatalf("firings below enforce took capacity: %+v", st)
	}
	if st.Decisions[decide.KindAnnotate] != 10 || st.Decisions[decide.KindObserve] != 10 {
		t.Fatalf("decisions = %v", st.Decisions)
	}
	// The rule is promoted (a pack reload): ten firings earlier make no storm.
	r.Mode = rules.ModeEnforce
	if dec := d.Decide(flt(node(0), r), facts); dec.Kind != decide.KindTaint {
		t.Fatalf("first enforce firing: %s (%s)", short(dec), dec.Message)
	}
	if got := d.Taints().Left(facts); got != 0 {
		t.Fatalf("budget left %d after one taint of a budget of 1", got)
	}
}

// TestModeDropReleasesHeld: a held fault whose rule drops below enforce leaves the
// queue as an annotate decision, not a taint.
func TestModeDropReleasesHeld(t *testing.T) {
	d := newDecider(t, decide.Config{MaxNodes: 1}, newClock())
	facts := decide.NodeFacts{Eligible: 100} // three firings make no storm
	r := modeRule("x", rules.ActionTaint, rules.ModeEnforce)
	if got := short(d.Decide(flt(node(0), r), facts)); got != "taint" {
		t.Fatalf("first: %s", got)
	}
	if got := short(d.Decide(flt(node(1), r), facts)); got != "hold:budget" {
		t.Fatalf("second: %s", got)
	}
	r.Mode = rules.ModeAnnotate
	rel := d.Release(facts)
	if len(rel) != 1 || rel[0].Kind != decide.KindAnnotate || rel[0].Fault.Node != node(1) || rel[0].Mode != rules.ModeAnnotate {
		t.Fatalf("Release = %v", rel)
	}
	if h := d.Held(); len(h) != 0 {
		t.Fatalf("still held: %+v", h)
	}
	// A fresh firing of a held fault's rule in mode observe clears it too.
	r.Mode = rules.ModeEnforce
	if got := short(d.Decide(flt(node(2), r), facts)); got != "hold:budget" {
		t.Fatalf("third: %s", got)
	}
	r.Mode = rules.ModeObserve
	if got := short(d.Decide(flt(node(2), r), facts)); got != "observe" {
		t.Fatalf("observed: %s", got)
	}
	if h := d.Held(); len(h) != 0 {
		t.Fatalf("still held after observe: %+v", h)
	}
}

// TestModesUnderDryRun: dry-run wraps only what takes capacity; observe and
// annotate decisions are the same with or without it.
func TestModesUnderDryRun(t *testing.T) {
	d := newDecider(t, decide.Config{DryRun: true}, newClock())
	facts := decide.NodeFacts{Eligible: 10}
	for _, c := range []struct {
		mode rules.Mode
		want string
	}{{rules.ModeObserve, "observe"}, {rules.ModeAnnotate, "annotate"}, {rules.ModeEnforce, "dry-run:taint"}} {
		if got := short(d.Decide(flt(node(0), modeRule("x", rules.ActionTaint, c.mode)), facts)); got != c.want {
			t.Errorf("mode %s under dry-run: %s, want %s", c.mode, got, c.want)
		}
	}
}

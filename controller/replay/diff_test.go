package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

func TestDiffSidesAndOrder(t *testing.T) {
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	act := func(node string, o Outcome, at time.Time) Action {
		return Action{Node: node, Rule: "net/link-down", Outcome: o, First: at, Last: at, Count: 1}
	}
	cand := &Result{Actions: []Action{act("b", OutcomeTaint, t0), act("c", OutcomeTaint, t0), act("d", HoldOutcome("budget"), t0)}}
	base := &Result{Actions: []Action{act("a", OutcomeTaint, t0), act("b", OutcomeTaint, t0.Add(time.Hour)), act("d", OutcomeTaint, t0)}}
	rows := Diff(cand, base)
	var got []string
	for _, r := range rows {
		got = append(got, string(r.In)+":"+r.Node+":"+string(r.Outcome))
	}
	want := "candidate:c:taint candidate:d:hold:budget baseline:a:taint baseline:d:taint both:b:taint"
	if strings.Join(got, " ") != want {
		t.Fatalf("rows %v, want %s", got, want)
	}
	if b := rows[len(rows)-1]; !b.Baseline.First.Equal(t0.Add(time.Hour)) || !b.Candidate.First.Equal(t0) {
		t.Errorf("both-row keeps each side's time: %+v %+v", b.Candidate, b.Baseline)
	}
	if !Changed(rows) {
		t.Error("Changed is false for a diff with one-sided rows")
	}
	if Changed(Diff(cand, cand)) {
		t.Error("a result diffed with itself changed")
	}
}

// TestOutcomeOfEachMode: a replay reports what a rule's mode lets it do, so a pack
// that moves a rule from annotate to enforce shows the taints it would add.
func TestOutcomeOfEachMode(t *testing.T) {
	for kind, want := range map[decide.Kind]Outcome{
		decide.KindTaint: OutcomeTaint, decide.KindAlreadyTainted: OutcomeTaint,
		decide.KindAnnotate: OutcomeAnnotate, decide.KindObserve: OutcomeObserve,
		decide.KindHold: HoldOutcome(decide.ReasonStorm), decide.KindNone: "", decide.KindEscalate: OutcomeEscalate,
	} {
		d := decide.Decision{Kind: kind}
		if kind == decide.KindHold {
			d.Reason = decide.ReasonStorm
		}
		if got := outcome(d); got != want {
			t.Errorf("%s: outcome %q, want %q", kind, got, want)
		}
	}
}

func TestReportJSONAndTable(t *testing.T) {
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	a := Action{Node: "gpu-1", Rule: "net/link-down", Severity: "critical", Outcome: OutcomeTaint, First: t0, Last: t0, Count: 2}
	rep := NewReport(t0, t0.Add(720*time.Hour), Fleet{Nodes: 3, Eligible: 3},
		Set{Packs: "built-in+dir", Result: &Result{Lines: 10, Actions: []Action{a}}},
		Set{Packs: "built-in", Result: &Result{Lines: 10}})
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Diff) != 1 || back.Diff[0].In != OnlyCandidate || back.Diff[0].Candidate.Count != 2 || back.Diff[0].Baseline != nil {
		t.Errorf("JSON round trip: %s", js.String())
	}
	var tab bytes.Buffer
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"candidate  built-in+dir", "candidate  gpu-1  net/link-down  taint    -     2026-10-01T00:00:00Z  -", "2/-"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
}

// TestDiffOfStepsAndFleets: the steps of a ladder are rows of their own (a
// candidate that climbs further shows the extra step), and a fleet fault raised by
// one set only, or with other members, is a change.
func TestDiffOfStepsAndFleets(t *testing.T) {
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	step := func(n int, a rules.StepAction) Action {
		return Action{Node: "gpu-1", Rule: "xid/gpu-lost", Outcome: OutcomeEscalate, Step: &StepRef{Step: n, Action: a}, First: t0, Last: t0, Count: 1}
	}
	taint := Action{Node: "gpu-1", Rule: "xid/gpu-lost", Outcome: OutcomeTaint, First: t0, Last: t0, Count: 1}
	rack := func(members ...string) FleetFault {
		return FleetFault{Group: decide.Group{Label: "rack", Value: "a"}, Family: "net", Since: t0, Members: members, Threshold: 3}
	}
	cand := &Result{Actions: []Action{taint, step(1, rules.StepDrain), step(2, rules.StepService)}, Fleets: []FleetFault{rack("a-0", "a-1", "a-2")}}
	base := &Result{Actions: []Action{taint, step(1, rules.StepDrain)}, Fleets: []FleetFault{}}
	rep := NewReport(t0, t0.Add(time.Hour), Fleet{}, Set{Packs: "c", Result: cand}, Set{Packs: "b", Result: base})
	var got []string
	for _, r := range rep.Diff {
		got = append(got, string(r.In)+":"+string(r.Outcome)+":"+r.Step.String())
	}
	if want := "candidate:escalate:2 service both:escalate:1 drain both:taint:-"; strings.Join(got, " ") != want {
		t.Errorf("rows %v, want %s", got, want)
	}
	if len(rep.Fleets) != 1 || rep.Fleets[0].In != OnlyCandidate || !rep.Changed() {
		t.Errorf("fleet rows %+v, want one of the candidate's, a change", rep.Fleets)
	}
	var tab bytes.Buffer
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"candidate  rack=a       net   2026-10-01T00:00:00Z  -               3/-        a-0,a-1,a-2",
		"candidate  gpu-1  xid/gpu-lost  escalate  2 service"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
	// The same fleet fault with another member is a change; the same one is not.
	base.Fleets = []FleetFault{rack("a-0", "a-1", "a-3")}
	if !FleetsChanged(FleetDiff(cand, base)) || FleetsChanged(FleetDiff(cand, cand)) {
		t.Error("FleetsChanged misses other members, or sees a change in a result diffed with itself")
	}
}

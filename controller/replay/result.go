package replay

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

// Outcome is what a decision would have done to a node, as a replay reports it:
// "taint", "probe", "event", "annotate" (a rule in mode annotate: a NodeFault and
// an Event, no taint), "observe" (mode observe: counted only), "hold:<reason>"
// (budget, rule-budget, storm, opted-out, fleet, group-budget), and for the steps
// of a rule's escalation ladder "escalate" (the step taken) or "needs-probe" (the
// step waits for a confirming probe to fail, which a replay cannot know).
type Outcome string

// Outcomes other than holds.
const (
	OutcomeTaint      Outcome = "taint"
	OutcomeProbe      Outcome = "probe"
	OutcomeEvent      Outcome = "event"
	OutcomeAnnotate   Outcome = "annotate"
	OutcomeObserve    Outcome = "observe"
	OutcomeEscalate   Outcome = "escalate"
	OutcomeNeedsProbe Outcome = "needs-probe"
)

// StepRef names the escalation step a row is about.
type StepRef struct {
	Step   int              `json:"step"` // 1-based place in the rule's ladder
	Action rules.StepAction `json:"action"`
	// Why is the trigger that made the step due, when the row was first decided.
	Why string `json:"why"`
	// Assumed: the step's trigger is taintedFor, reached on the assumption that the
	// node was not untainted other than by its rule's recovery policy (an
	// operator's untaint is not in the logs).
	Assumed bool `json:"assumed,omitempty"`
}

func (s *StepRef) String() string {
	if s == nil {
		return "-"
	}
	out := fmt.Sprintf("%d %s", s.Step, s.Action)
	if s.Assumed {
		out += " (assumed)"
	}
	return out
}

func stepRef(s *decide.Step) *StepRef {
	if s == nil {
		return nil
	}
	return &StepRef{Step: s.Index + 1, Action: s.Action, Why: s.Why, Assumed: s.TaintedFor > 0}
}

// HoldOutcome is the outcome of a fault held for reason.
func HoldOutcome(reason decide.HoldReason) Outcome { return Outcome("hold:" + string(reason)) }

// Action is one row of a replay: what the packs would have done to a node for a
// rule, when first and last, and how often.
type Action struct {
	Node     string  `json:"node"`
	Rule     string  `json:"rule"` // pack/id
	Severity string  `json:"severity"`
	Outcome  Outcome `json:"outcome"`
	// Step is the escalation step of the rule's ladder the row is about; nil for
	// the fault's own decisions.
	Step  *StepRef  `json:"step,omitempty"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Count is the number of decisions of this outcome; for a taint, also the
	// firings on the tainted node (already tainted).
	Count int `json:"count"`
	// Recovered is how often the taint was lifted by the rule's recovery policy.
	Recovered int `json:"recovered,omitempty"`
	// Message is the first decision's explanation; Line the last evidence line.
	Message string `json:"message"`
	Line    string `json:"line,omitempty"`
}

func (a Action) key() string {
	k := a.Node + "\x00" + a.Rule + "\x00" + string(a.Outcome)
	if a.Step != nil {
		k += fmt.Sprintf("\x00%03d%s", a.Step.Step, a.Step.Action)
	}
	return k
}

// Result is what one pack set would have done.
type Result struct {
	// Queries are the LogQL queries the packs read.
	Queries []string `json:"queries"`
	// Lines is the number of lines matched (OtherShard not included); NoNode those
	// without a node, which no rule can fault.
	Lines  uint64 `json:"lines"`
	NoNode uint64 `json:"noNode"`
	// OtherShard counts the lines of nodes outside the replayed shard (skipped).
	OtherShard uint64 `json:"otherShard,omitempty"`
	// Actions, sorted by node, rule and outcome.
	Actions []Action `json:"actions"`
	// StillHeld counts the faults still held at the end of the stretch.
	StillHeld int `json:"stillHeld"`
	// Fleets are the fleet faults raised (fleet correlation, FleetConfig), sorted
	// by group and pack.
	Fleets []FleetFault `json:"fleets"`
	// FleetDropped counts the firings not correlated because decide.MaxFleetGroups
	// groups were tracked already.
	FleetDropped uint64 `json:"fleetDropped,omitempty"`

	max   int
	index map[string]int
}

func newResult(max int) *Result { return &Result{max: max, index: map[string]int{}} }

// Nodes returns the nodes with an action of outcome o, sorted.
func (r *Result) Nodes(o Outcome) []string {
	var out []string
	for _, a := range r.Actions {
		if a.Outcome == o {
			out = append(out, a.Node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// outcome maps a decision to its row, or "" for decisions that change nothing.
func outcome(d decide.Decision) Outcome {
	switch d.Kind {
	case decide.KindTaint, decide.KindAlreadyTainted:
		return OutcomeTaint
	case decide.KindProbe:
		return OutcomeProbe
	case decide.KindEvent:
		return OutcomeEvent
	case decide.KindAnnotate:
		return OutcomeAnnotate
	case decide.KindObserve:
		return OutcomeObserve
	case decide.KindHold:
		return HoldOutcome(d.Reason)
	case decide.KindEscalate:
		return OutcomeEscalate
	}
	return ""
}

// add records decision d taken at now.
func (r *Result) add(d decide.Decision, now time.Time) error {
	o := outcome(d)
	if o == "" {
		return nil
	}
	return r.put(d.Fault, o, stepRef(d.Step), d.Message, now)
}

// put counts a row's decision at now.
func (r *Result) put(f fault.Fault, o Outcome, step *StepRef, message string, now time.Time) error {
	a := Action{Node: f.Node, Rule: f.Rule.String(), Severity: string(f.Rule.Severity), Outcome: o, Step: step}
	i, ok := r.index[a.key()]
	if !ok {
		if len(r.Actions) >= r.max {
			return fmt.Errorf("more than %d distinct (node, rule, outcome) rows; replay a shorter stretch", r.max)
		}
		a.First, a.Message = now, message
		r.Actions = append(r.Actions, a)
		i = len(r.Actions) - 1
		r.index[a.key()] = i
	}
	p := &r.Actions[i]
	p.Last = now
	p.Count++
	if n := len(f.Evidence); n > 0 {
		p.Line = f.Evidence[n-1].Text
	}
	return nil
}

// recovered notes that the taint of f was lifted.
func (r *Result) recovered(f fault.Fault) {
	a := Action{Node: f.Node, Rule: f.Rule.String(), Outcome: OutcomeTaint}
	if i, ok := r.index[a.key()]; ok {
		r.Actions[i].Recovered++
	}
}

// finish sorts the rows and notes the faults still held and the fleet faults.
func (r *Result) finish(held []decide.HeldFault, fleets []decide.FleetFault) {
	r.StillHeld = len(held)
	r.Fleets = []FleetFault{}
	for _, f := range fleets {
		r.Fleets = append(r.Fleets, FleetFault{Group: f.Group, Family: f.Family, Since: f.Since, Members: f.Members, Threshold: f.Threshold})
	}
	slices.SortFunc(r.Actions, func(a, b Action) int {
		return strings.Compare(a.key(), b.key())
	})
	r.index = nil
}

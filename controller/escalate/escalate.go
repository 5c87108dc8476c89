// Package escalate climbs the rules' escalation ladders: it records each firing of
// a fault whose rule has a ladder, decides through the decider's brakes whether the
// step that is due may be taken, carries it out with its Do from the step registry
// (controller/steps) and records the step reached in the fault's NodeFault. The
// controller constructs it and calls Fire from the act stage (on the per-node
// action queue) and Reconcile from its reconcile loop.
package escalate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/steps"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// Event reasons of the ladder.
const (
	ReasonEscalated      = "FaultEscalated"
	ReasonEscalationHeld = "FaultEscalationHeld"
)

// Records writes the faults' NodeFault records (nodefault.Store).
type Records interface {
	Record(ctx context.Context, node, pack, rule string, ch nodefault.Change) (*v1alpha1.NodeFault, error)
	// Get reads a record from the API server (not a cache).
	Get(ctx context.Context, name string) (*v1alpha1.NodeFault, error)
}

// Nodes is what the ladder reads of the nodes and their records, and where its
// Events go (act.Actor).
type Nodes interface {
	BootID(node string) (string, error)
	// Escalating lists the cached records of faults that climb a ladder.
	Escalating() ([]*v1alpha1.NodeFault, error)
	Event(ctx context.Context, node string, f fault.Fault, reason, message string) error
}

// Decider says whether a step may be taken (decide.Decider).
type Decider interface {
	Escalate(f fault.Fault, s decide.Step, facts decide.NodeFacts) decide.Decision
}

// Deps are what the ladders are given.
type Deps struct {
	Records Records
	Nodes   Nodes
	Decider Decider
	// Facts reads the nodes' facts a decision rests on.
	Facts func() (decide.NodeFacts, error)
	// Rules returns the rule set in force (the packs reload).
	Rules func() *rules.Set
	// Steps holds the steps' Do (steps.Default() when nil); StepDeps is what
	// they are given.
	Steps    *steps.Registry
	StepDeps steps.Deps
	// Decisions counts the steps' outcomes (faultline_controller_decisions_total:
	// kind, result, mode); RecordErrors the records not written.
	Decisions    *prometheus.CounterVec
	RecordErrors prometheus.Counter
	Log          *slog.Logger
}

// Ladders climbs the ladders of the faults of one controller.
type Ladders struct {
	d Deps

	mu       sync.Mutex
	climbing map[string]bool // fault key → a climb of its ladder is under way
}

// New returns the ladders, given their dependencies.
func New(d Deps) (*Ladders, error) {
	if d.Records == nil || d.Nodes == nil || d.Decider == nil || d.Facts == nil || d.Rules == nil || d.Decisions == nil || d.RecordErrors == nil {
		return nil, errors.New("escalate: records, nodes, decider, facts, rules and metrics are required")
	}
	if d.Steps == nil {
		d.Steps = steps.Default()
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.StepDeps.Log == nil {
		d.StepDeps.Log = d.Log
	}
	return &Ladders{d: d, climbing: map[string]bool{}}, nil
}

// Fire records a firing of a laddered fault (decide.Laddered; every one: the
// repeat trigger counts them) and climbs its ladder when a step is due.
func (l *Ladders) Fire(ctx context.Context, f fault.Fault) {
	// The boot the line was written in (its metadata), else the node's boot now.
	var boot string
	if n := len(f.Evidence); n > 0 {
		boot = f.Evidence[n-1].Labels[logstream.MetaBootID]
	}
	if boot == "" {
		boot, _ = l.d.Nodes.BootID(f.Node)
	}
	nf, err := l.d.Records.Record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Fault: &f, BootID: boot, Firing: true})
	if err != nil {
		l.d.RecordErrors.Inc()
		l.d.Log.Warn("escalation firing not recorded", "node", f.Node, "rule", f.Rule.String(), "err", err)
		return
	}
	l.climbAsync(ctx, f, nf)
}

// Reconcile climbs the ladders whose steps fall due without a firing (taintedFor,
// a probe that failed) or wait (a blocked drain).
func (l *Ladders) Reconcile(ctx context.Context) {
	recs, err := l.d.Nodes.Escalating()
	if err != nil {
		return
	}
	set := l.d.Rules()
	for _, nf := range recs {
		f, ok := nodefault.FaultOf(set, nf)
		if !ok || len(f.Rule.Escalate) == 0 {
			continue
		}
		l.climbAsync(ctx, f, nf.DeepCopy())
	}
}

// climbAsync climbs in the background (a drain may wait on evictions), one climb
// per fault at a time; a firing meanwhile is recorded and Reconcile looks at it
// next.
func (l *Ladders) climbAsync(ctx context.Context, f fault.Fault, nf *v1alpha1.NodeFault) {
	key := f.Key()
	l.mu.Lock()
	if l.climbing[key] {
		l.mu.Unlock()
		return
	}
	l.climbing[key] = true
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			delete(l.climbing, key)
			l.mu.Unlock()
		}()
		l.climb(ctx, f, nf)
	}()
}

// ladderOf reads a record's climb for decide.NextStep.
func ladderOf(nf *v1alpha1.NodeFault) decide.Ladder {
	st := nf.Status
	var l decide.Ladder
	if t := st.Taint; t != nil && (t.State == v1alpha1.TaintPlaced || t.State == v1alpha1.TaintExisting) {
		l.TaintedSince, l.Since = t.Time.Time, t.Time.Time
	}
	if e := st.Escalation; e != nil {
		l.Reached, l.Done = int(e.Step), e.State == v1alpha1.StepDone
		if e.Time != nil { // step 0: the first firing's time
			l.Since = e.Time.Time
		}
		for _, f := range e.Firings {
			l.Firings = append(l.Firings, decide.Firing{Time: f.Time.Time, BootID: f.BootID})
		}
	}
	for _, p := range st.Probes {
		if p.Purpose == "confirm" && p.Verdict == "failed" {
			l.ProbeFailed = p.Time.Time
		}
	}
	return l
}

// climb takes the step of f's ladder that is due, if any, through the decider's
// brakes, and records the step reached in the NodeFault.
func (l *Ladders) climb(ctx context.Context, f fault.Fault, nf *v1alpha1.NodeFault) {
	if nf.Status.Taint == nil {
		return // the ladder climbs from the taint
	}
	s, ok := decide.NextStep(f.Rule.Escalate, ladderOf(nf), time.Now())
	if !ok {
		return
	}
	// A step that looks due in nf (the informer's cache, or a firing's write) may be
	// one a climb ended a moment ago, whose record nf predates: taking it again would
	// run it twice (a second GPU reset). The API server's copy decides; steps are
	// rare, so is this read.
	fresh, err := l.d.Records.Get(ctx, nf.Name)
	if err != nil {
		l.d.Log.Warn("escalation: record not read", "node", f.Node, "rule", f.Rule.String(), "err", err)
		return
	}
	if nf = fresh; nf.Status.Taint == nil {
		return
	}
	if s, ok = decide.NextStep(f.Rule.Escalate, ladderOf(nf), time.Now()); !ok {
		return
	}
	facts, err := l.d.Facts()
	if err != nil {
		l.d.Log.Error("node facts", "err", err)
		return
	}
	d := l.d.Decider.Escalate(f, s, facts)
	result := "ok"
	rec := &v1alpha1.Escalation{Step: int32(s.Index + 1), Action: string(s.Action), Reason: s.Why}
	reason := ""
	label := "escalate-" + string(s.Action)
	switch d.Kind {
	case decide.KindEscalate:
		// Reached when it starts: what the step itself records (gpu-reset's
		// confirming probes) comes after it, for the step that follows.
		started := metav1.NewMicroTime(time.Now())
		rec.Time = &started
		rec.State, rec.Message = l.take(ctx, f, nf, s)
		switch rec.State {
		case v1alpha1.StepFailed:
			result = "error"
		case v1alpha1.StepWaiting:
			result = "waiting"
		}
	case decide.KindHold:
		rec.State, rec.Message, reason = v1alpha1.StepHeld, d.Message, ReasonEscalationHeld
		label = "hold-" + string(d.Reason)
	default:
		label = string(d.Kind) + "-" + label
		// Below enforce, or dry-run: said, not taken. The step stays held, so the
		// ladder does not move past it until the rule may act.
		rec.State, rec.Message, reason = v1alpha1.StepHeld, d.Message, act.ReasonAnnotated
	}
	if old := nf.Status.Escalation; old != nil && old.Step == rec.Step && old.State == rec.State && old.Message == rec.Message {
		return // a retry that changed nothing: no write, no Event
	}
	// Counted when the step's outcome changes: a wait retried every reconcile is
	// one decision, not one a reconcile.
	l.d.Decisions.WithLabelValues(label, result, string(d.Mode)).Inc()
	if reason != "" {
		l.event(ctx, f, reason, d.Message)
	}
	if nf.Status.Escalation != nil && nf.Status.Escalation.Step == rec.Step && nf.Status.Escalation.Time != nil {
		rec.Time = nf.Status.Escalation.Time // retries keep the time the step was reached
	}
	l.record(ctx, f, nodefault.Change{Step: rec,
		Decision: "escalate-" + string(s.Action), Message: fmt.Sprintf("step %d %s (%s): %s", rec.Step, rec.State, s.Why, rec.Message)})
	l.d.Log.Info("escalation", "node", f.Node, "rule", f.Rule.String(), "step", rec.Step, "action", rec.Action, "state", rec.State, "message", rec.Message)
}

// take carries a step out with its Do and says how far it got.
func (l *Ladders) take(ctx context.Context, f fault.Fault, nf *v1alpha1.NodeFault, s decide.Step) (v1alpha1.StepState, string) {
	do, ok := l.d.Steps.Get(string(s.Action))
	if !ok {
		return l.failed(f, s, fmt.Errorf("unknown step action %q", s.Action))
	}
	res, err := do(ctx, l.d.StepDeps, steps.Target{Fault: f, Record: nf, Step: s})
	switch {
	case err != nil:
		return l.failed(f, s, err)
	case res.Waiting:
		return v1alpha1.StepWaiting, res.Message
	}
	l.event(ctx, f, ReasonEscalated, fmt.Sprintf("%s: step %d (%s): %s", f.Rule, s.Index+1, s.Action, res.Message))
	return v1alpha1.StepDone, res.Message
}

func (l *Ladders) failed(f fault.Fault, s decide.Step, err error) (v1alpha1.StepState, string) {
	l.d.Log.Warn("escalation step failed", "node", f.Node, "rule", f.Rule.String(), "action", s.Action, "err", err)
	return v1alpha1.StepFailed, err.Error()
}

// record applies a change to the fault's NodeFault; a failure is logged and
// counted, never fatal to the step already taken.
func (l *Ladders) record(ctx context.Context, f fault.Fault, ch nodefault.Change) {
	if _, err := l.d.Records.Record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, ch); err != nil {
		l.d.RecordErrors.Inc()
		l.d.Log.Warn("NodeFault not written", "node", f.Node, "rule", f.Rule.Pack+"/"+f.Rule.ID, "err", err)
	}
}

func (l *Ladders) event(ctx context.Context, f fault.Fault, reason, msg string) {
	if err := l.d.Nodes.Event(ctx, f.Node, f, reason, msg); err != nil {
		l.d.Log.Warn("event not recorded", "node", f.Node, "reason", reason, "err", err)
	}
}

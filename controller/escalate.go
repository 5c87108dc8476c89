package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// EscalationConfig configures the steps of the rules' escalation ladders.
type EscalationConfig struct {
	// Remediator creates the remediate step's objects; nil: a remediate step fails
	// (recorded) until one is configured.
	Remediator *act.Remediator
	// DrainTimeout bounds one drain attempt (default act.DefaultDrainTimeout); a
	// drain a PodDisruptionBudget blocks, or whose evicted pods are still
	// terminating, waits and is tried again at the next reconcile.
	DrainTimeout time.Duration
	// DrainGraceSeconds, when set, overrides the pods' termination grace period.
	DrainGraceSeconds *int
}

// Event reasons of the ladder.
const (
	ReasonEscalated      = "FaultEscalated"
	ReasonEscalationHeld = "FaultEscalationHeld"
)

// laddered: the decide stage says which decisions feed a ladder (replay asks it too).
func laddered(d decide.Decision) bool { return decide.Laddered(d) }

// ladderFiring records a firing of a laddered fault (every one: the repeat trigger
// counts them) and climbs its ladder when a step is due.
func (c *Controller) ladderFiring(ctx context.Context, f fault.Fault) {
	// The boot the line was written in (its metadata), else the node's boot now.
	var boot string
	if n := len(f.Evidence); n > 0 {
		boot = f.Evidence[n-1].Labels[logstream.MetaBootID]
	}
	if boot == "" {
		boot, _ = c.actor.BootID(f.Node)
	}
	nf, err := c.records.Record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Fault: &f, BootID: boot, Firing: true})
	if err != nil {
		c.m.recordErrors.Inc()
		c.log.Warn("escalation firing not recorded", "node", f.Node, "rule", f.Rule.String(), "err", err)
		return
	}
	c.climbAsync(ctx, f, nf)
}

// climbAsync climbs in the background (a drain may wait on evictions), one climb
// per fault at a time; a firing meanwhile is recorded and the reconcile loop looks
// at it next.
func (c *Controller) climbAsync(ctx context.Context, f fault.Fault, nf *v1alpha1.NodeFault) {
	key := f.Key()
	c.mu.Lock()
	if c.climbing[key] {
		c.mu.Unlock()
		return
	}
	c.climbing[key] = true
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.climbing, key)
			c.mu.Unlock()
		}()
		c.climb(ctx, f, nf)
	}()
}

// reconcileLadders climbs the ladders whose steps fall due without a firing
// (taintedFor, a probe that failed) or wait (a blocked drain).
func (c *Controller) reconcileLadders(ctx context.Context) {
	recs, err := c.actor.Escalating()
	if err != nil {
		return
	}
	set := c.packs.Engine().Set()
	for _, nf := range recs {
		f, ok := faultOf(set, nf)
		if !ok || len(f.Rule.Escalate) == 0 {
			continue
		}
		c.climbAsync(ctx, f, nf.DeepCopy())
	}
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
func (c *Controller) climb(ctx context.Context, f fault.Fault, nf *v1alpha1.NodeFault) {
	if nf.Status.Taint == nil {
		return // the ladder climbs from the taint
	}
	s, ok := decide.NextStep(f.Rule.Escalate, ladderOf(nf), time.Now())
	if !ok {
		return
	}
	facts, err := c.actor.Facts()
	if err != nil {
		c.log.Error("node facts", "err", err)
		return
	}
	d := c.decider.Escalate(f, s, facts)
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
		rec.State, rec.Message = c.takeStep(ctx, f, nf, s)
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
	c.m.decisions.WithLabelValues(label, result, string(d.Mode)).Inc()
	if reason != "" {
		c.carrier.event(ctx, f, reason, d.Message)
	}
	if nf.Status.Escalation != nil && nf.Status.Escalation.Step == rec.Step && nf.Status.Escalation.Time != nil {
		rec.Time = nf.Status.Escalation.Time // retries keep the time the step was reached
	}
	c.rec.write(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Step: rec,
		Decision: "escalate-" + string(s.Action), Message: fmt.Sprintf("step %d %s (%s): %s", rec.Step, rec.State, s.Why, rec.Message)})
	c.log.Info("escalation", "node", f.Node, "rule", f.Rule.String(), "step", rec.Step, "action", rec.Action, "state", rec.State, "message", rec.Message)
}

// takeStep carries a step out and says how far it got.
func (c *Controller) takeStep(ctx context.Context, f fault.Fault, nf *v1alpha1.NodeFault, s decide.Step) (v1alpha1.StepState, string) {
	ec := c.cfg.Escalation
	done := func(msg string) (v1alpha1.StepState, string) {
		c.carrier.event(ctx, f, ReasonEscalated, fmt.Sprintf("%s: step %d (%s): %s", f.Rule, s.Index+1, s.Action, msg))
		return v1alpha1.StepDone, msg
	}
	fail := func(err error) (v1alpha1.StepState, string) {
		c.log.Warn("escalation step failed", "node", f.Node, "rule", f.Rule.String(), "action", s.Action, "err", err)
		return v1alpha1.StepFailed, err.Error()
	}
	switch s.Action {
	case rules.StepTaint:
		boot, _ := c.actor.BootID(f.Node)
		if _, err := c.actor.TaintNode(ctx, f, boot); err != nil {
			c.decider.NotApplied(f)
			return fail(err)
		}
		return done("tainted " + f.Rule.Taint.Key + "=" + f.Rule.Taint.Value + ":" + f.Rule.Taint.Effect)
	case rules.StepDrain:
		res, err := c.actor.Drain(ctx, f.Node, act.DrainOptions{Timeout: ec.DrainTimeout, GracePeriodSeconds: ec.DrainGraceSeconds,
			Log: c.log.With("rule", f.Rule.String())})
		if errors.Is(err, act.ErrDrainBlocked) || errors.Is(err, act.ErrDrainTerminating) {
			return v1alpha1.StepWaiting, fmt.Sprintf("evicted %d pod(s); waiting: %v", len(res.Evicted), err)
		}
		if err != nil {
			return fail(err)
		}
		msg := fmt.Sprintf("drained: %d pod(s) evicted", len(res.Evicted))
		if len(res.Evicted) > 0 {
			msg += " (" + strings.Join(res.Evicted, ", ") + ")"
		}
		return done(msg)
	case rules.StepService:
		msg := fmt.Sprintf("%s (%s) escalated to service: %s; %s", f.Rule, f.Rule.Severity, s.Why, lastLine(f))
		if err := c.actor.MarkForService(ctx, f.Node, msg); err != nil {
			return fail(err)
		}
		return done("labelled " + act.LabelService + "=required, condition " + act.ConditionService + " set")
	case rules.StepRemediate:
		if !ec.Remediator.Has(s.Template) {
			return fail(fmt.Errorf("remediation template %q is not loaded", s.Template))
		}
		owner := &metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodeFault", Name: nf.Name, UID: nf.UID}
		obj, created, err := ec.Remediator.Remediate(ctx, s.Template, act.TemplateData{Node: f.Node, Rule: f.Rule.ID, Pack: f.Rule.Pack,
			Fault: nf.Name, Namespace: c.cfg.Namespace}, owner)
		if err != nil {
			return fail(err)
		}
		if !created {
			return done("remediation " + obj + " already exists")
		}
		return done("created remediation " + obj + " from template " + s.Template)
	case rules.StepGPUReset:
		r, err := c.triggers.ResetGPUs(ctx, f)
		if errors.Is(err, trigger.ErrGPUsBusy) {
			return v1alpha1.StepWaiting, err.Error()
		}
		if err != nil {
			return fail(err)
		}
		return done(fmt.Sprintf("%s; confirming probes %s %s: %s", r.Message, strings.Join(r.Checks, ","), r.Verdict, r.Summary))
	}
	return fail(fmt.Errorf("unknown step action %q", s.Action))
}

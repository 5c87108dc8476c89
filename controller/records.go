package controller

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/rules"
)

// phaseOf maps a decision on a fault to the phase of its NodeFault and the cause
// of the change ("" for none).
func phaseOf(d decide.Decision) (v1alpha1.Phase, nodefault.Cause) {
	switch d.Kind {
	case decide.KindTaint, decide.KindAlreadyTainted:
		if d.Unconfirmed {
			return v1alpha1.PhaseAwaitingIdle, nodefault.CauseAwaitIdle
		}
		return v1alpha1.PhaseTainted, nodefault.CauseTaint
	case decide.KindProbe:
		return v1alpha1.PhaseConfirming, nodefault.CauseProbe
	case decide.KindHold:
		return v1alpha1.PhaseHeld, nodefault.CauseHold
	case decide.KindDryRun, decide.KindEvent, decide.KindAnnotate:
		return v1alpha1.PhaseObserved, nodefault.CauseAnnotate
	}
	return "", ""
}

// recorder writes what happens to a fault to its NodeFault record: decisions, probe
// verdicts, resolutions. The store remembers what it last wrote (nodefault.Store.Due),
// so a burst of one fault is not a burst of writes.
type recorder struct {
	store  *nodefault.Store
	actor  *act.Actor
	errors prometheus.Counter
	log    *slog.Logger
}

// decision writes a decision on a fault to its NodeFault. Only faults of rules
// that can taint (action taint or probe) have a record, and only from mode annotate
// up: a rule in mode observe writes nothing (phaseOf gives no phase), so observing
// a noisy rule across a fleet costs the apiserver nothing. A repeat of the phase last
// written is written at most every EvidenceRefresh.
func (r *recorder) decision(ctx context.Context, d decide.Decision, message string) {
	if ch, due := r.change(d, message); due {
		f := d.Fault
		r.write(ctx, f.Node, f.Rule.Pack, f.Rule.ID, ch)
	}
}

// change is the change decision writes for d, and whether it is due (see
// decision); a due change is noted as written (store.Undue takes that back when the
// write does not happen).
func (r *recorder) change(d decide.Decision, message string) (nodefault.Change, bool) {
	f := d.Fault
	phase, cause := phaseOf(d)
	if phase == "" || (f.Rule.Action != rules.ActionTaint && f.Rule.Action != rules.ActionProbe) {
		return nodefault.Change{}, false
	}
	if cause == nodefault.CauseAnnotate && r.carriesTaint(f) {
		// A rule lowered to annotate (or dry-run) on a node that still carries its
		// taint: the fault stays Tainted until it recovers or is untainted.
		phase, cause = v1alpha1.PhaseTainted, ""
	}
	if !r.store.Due(f.Key(), phase) {
		return nodefault.Change{}, false
	}
	boot, _ := r.actor.BootID(f.Node)
	kind := string(d.Kind)
	if d.Kind == decide.KindDryRun {
		kind += "-" + string(d.Of)
	}
	reason := string(d.Reason)
	if d.Unconfirmed {
		reason, kind = trigger.ReasonWaitingForIdleGPUs, kind+"-unconfirmed"
	}
	ch := nodefault.Change{Fault: &f, BootID: boot, Phase: phase, Cause: cause, Mode: d.Mode,
		Reason: reason, Message: message, Decision: kind, LadderCounts: decide.Laddered(d)}
	if cause == "" {
		ch.Phase, ch.Mode = "", "" // the record keeps its phase and the mode of its taint
	}
	return ch, true
}

// carriesTaint says whether f's node carries f's rule's taint (the actor's view).
func (r *recorder) carriesTaint(f fault.Fault) bool {
	facts, err := r.actor.Facts()
	return err == nil && facts.HasRuleTaint(f.Node, f.Rule.String())
}

// write applies a change to a NodeFault; a failure is logged and counted, never
// fatal to the decision already carried out.
func (r *recorder) write(ctx context.Context, node, pack, rule string, ch nodefault.Change) {
	if _, err := r.store.Record(ctx, node, pack, rule, ch); err != nil {
		r.errors.Inc()
		r.log.Warn("NodeFault not written", "node", node, "rule", pack+"/"+rule, "err", err)
	}
}

// probe notes a phase change (when ch.Phase is set) and a probe verdict on a
// fault's NodeFault (the probe triggers call it).
func (r *recorder) probe(ctx context.Context, node, pack, rule string, ch nodefault.Change) {
	if ch.Phase != "" {
		r.store.Noted(fault.Key(node, pack, rule), ch.Phase)
	}
	r.write(ctx, node, pack, rule, ch)
}

// phase reads the phase of the NodeFault of a rule of pack on node ("" when there
// is none).
func (r *recorder) phase(ctx context.Context, node, pack, rule string) (v1alpha1.Phase, error) {
	nf, err := r.store.Get(ctx, nodefault.Name(node, pack, rule))
	switch {
	case apierrors.IsNotFound(err):
		return nodefault.PhaseNone, nil
	case err != nil:
		return "", err
	}
	return nf.Status.Phase, nil
}

// resolved marks the records of node's cleared faults (pack/rule ids) Resolved.
func (r *recorder) resolved(ctx context.Context, node string, ids []string, why string) {
	for _, id := range ids {
		pack, rule, ok := strings.Cut(id, "/")
		if !ok {
			continue
		}
		r.store.Undue(fault.Key(node, pack, rule))
		r.write(ctx, node, pack, rule, nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint,
			Message: why, Decision: "untaint"})
	}
}

// checkPlacing settles the taint entries a writer left in Placing (see
// act.CheckPlacing): at the start of a term for any age (the previous leader is
// gone), in Reconcile for those older than a minute.
func (r *recorder) checkPlacing(ctx context.Context, minAge time.Duration) {
	adopted, cleared, err := r.actor.CheckPlacing(ctx, minAge)
	if err != nil {
		r.errors.Inc()
		r.log.Warn("taints being placed not checked", "err", err)
	}
	if len(adopted) > 0 || len(cleared) > 0 {
		r.log.Info("taints a writer was placing checked against the Nodes", "adopted", adopted, "cleared", cleared)
	}
}

// resumeHeld puts the faults a previous leader held back into the decider's queue,
// and runs again the confirmations it had in flight (its probes' verdicts went to
// the old leader), from their NodeFault records.
func (c *Controller) resumeHeld(ctx context.Context) {
	all, err := c.records.List(ctx)
	if err != nil {
		c.m.recordErrors.Inc()
		c.log.Warn("held faults not resumed", "err", err)
		return
	}
	set := c.packs.Engine().Set()
	held, confirming := 0, 0
	for _, nf := range all {
		st := nf.Status
		if st.Phase != v1alpha1.PhaseHeld && st.Phase != v1alpha1.PhaseAwaitingIdle && !(st.Phase == v1alpha1.PhaseConfirming && confirmInFlight(st)) {
			continue
		}
		if !c.actor.Owns(nf.Spec.Node) {
			continue // another shard's node: that shard resumes it
		}
		f, ok := nodefault.FaultOf(set, &nf)
		if !ok {
			continue // the packs no longer have the rule
		}
		r := f.Rule
		if st.Phase == v1alpha1.PhaseAwaitingIdle && r.Action == rules.ActionProbe {
			c.log.Info("waiting again for idle GPUs, from its NodeFault record", "node", f.Node, "rule", r.String())
			c.triggers.ResumeAwaiting(ctx, f)
			confirming++
			continue
		}
		if st.Phase == v1alpha1.PhaseConfirming {
			if r.Action != rules.ActionProbe {
				continue // the rule no longer asks for probes
			}
			c.log.Info("resuming a confirmation from its NodeFault record", "node", f.Node, "rule", r.String())
			go c.triggers.Confirm(ctx, f)
			confirming++
			continue
		}
		c.decider.Restore(heldOf(f, st))
		held++
	}
	if held > 0 || confirming > 0 {
		c.log.Info("resumed faults from their NodeFault records", "held", held, "confirmations", confirming)
		c.gauges.update()
	}
}

// heldOf is the held fault a record in phase Held stands for, held since it was first.
func heldOf(f fault.Fault, st v1alpha1.NodeFaultStatus) decide.HeldFault {
	h := decide.HeldFault{Fault: f, Reason: decide.HoldReason(st.Reason), Message: st.Message, Updated: f.Time, Hits: int(st.Firings)}
	if st.HeldSince != nil {
		h.Since = st.HeldSince.Time
	} else {
		h.Since = f.Time
	}
	return h
}

// confirmInFlight says whether the last confirmation of a fault in phase Confirming
// has no verdict yet: no confirm verdict since the last probe decision.
func confirmInFlight(st v1alpha1.NodeFaultStatus) bool {
	var asked time.Time
	for _, d := range st.History {
		if d.Kind == string(decide.KindProbe) {
			asked = d.Time.Time
		}
	}
	for _, v := range st.Probes {
		if v.Purpose == "confirm" && !v.Time.Time.Before(asked) {
			return false
		}
	}
	return true
}

// collect deletes the records resolved longer than the retention ago.
func (r *recorder) collect(ctx context.Context) {
	n, err := r.store.Collect(ctx)
	if err != nil {
		r.errors.Inc()
		r.log.Warn("resolved NodeFaults not collected", "err", err)
	}
	if n > 0 {
		r.log.Info("collected resolved NodeFaults past their retention", "deleted", n)
	}
}

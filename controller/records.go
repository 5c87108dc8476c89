package controller

import (
	"context"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/rules"
)

// phaseOf maps a decision on a fault to the phase of its NodeFault ("" for none).
func phaseOf(d decide.Decision) v1alpha1.Phase {
	switch d.Kind {
	case decide.KindTaint, decide.KindAlreadyTainted:
		return v1alpha1.PhaseTainted
	case decide.KindProbe:
		return v1alpha1.PhaseConfirming
	case decide.KindHold:
		return v1alpha1.PhaseHeld
	case decide.KindDryRun, decide.KindEvent, decide.KindAnnotate:
		return v1alpha1.PhaseObserved
	}
	return ""
}

// recordDecision writes a decision on a fault to its NodeFault. Only faults of rules
// that can taint (action taint or probe) have a record, and only from mode annotate
// up: a rule in mode observe writes nothing (phaseOf gives no phase), so observing
// a noisy rule across a fleet costs the apiserver nothing. A repeat of the phase last
// written is written at most every EvidenceRefresh, so a burst of one fault does not
// become a burst of writes.
func (c *Controller) recordDecision(ctx context.Context, d decide.Decision, message string) {
	if ch, due := c.decisionChange(d, message); due {
		f := d.Fault
		c.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, ch)
	}
}

// decisionChange is the change recordDecision writes for d, and whether it is due
// (see recordDecision); a due change is noted as written (recordUndue takes that
// back when the write does not happen).
func (c *Controller) decisionChange(d decide.Decision, message string) (nodefault.Change, bool) {
	f := d.Fault
	phase := phaseOf(d)
	if phase == "" || (f.Rule.Action != rules.ActionTaint && f.Rule.Action != rules.ActionProbe) {
		return nodefault.Change{}, false
	}
	if !c.recordDue(f.Key(), phase) {
		return nodefault.Change{}, false
	}
	boot, _ := c.actor.BootID(f.Node)
	kind := string(d.Kind)
	if d.Kind == decide.KindDryRun {
		kind += "-" + string(d.Of)
	}
	return nodefault.Change{Fault: &f, BootID: boot, Phase: phase, Mode: d.Mode,
		Reason: string(d.Reason), Message: message, Decision: kind}, true
}

// recordUndue forgets that a fault's record was written (the write failed), so the
// next decision on it writes it.
func (c *Controller) recordUndue(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.recorded, key)
}

// record applies a change to a NodeFault; a failure is logged and counted, never
// fatal to the decision already carried out.
func (c *Controller) record(ctx context.Context, node, pack, rule string, ch nodefault.Change) {
	if _, err := c.records.Record(ctx, node, pack, rule, ch); err != nil {
		c.m.recordErrors.Inc()
		c.log.Warn("NodeFault not written", "node", node, "rule", pack+"/"+rule, "err", err)
	}
}

// recordDue says whether a fault's record may be written in phase now, and notes it.
func (c *Controller) recordDue(key string, phase v1alpha1.Phase) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	last, ok := c.recorded[key]
	if ok && last.phase == phase && now.Sub(last.at) < c.cfg.EvidenceRefresh {
		return false
	}
	if len(c.recorded) > 100000 {
		c.recorded = map[string]recordedPhase{}
	}
	c.recorded[key] = recordedPhase{phase: phase, at: now}
	return true
}

type recordedPhase struct {
	phase v1alpha1.Phase
	at    time.Time
}

// recordProbe notes a phase and a probe verdict on a fault's NodeFault (the probe
// triggers call it).
func (c *Controller) recordProbe(ctx context.Context, node, pack, rule string, phase v1alpha1.Phase, v *v1alpha1.ProbeVerdict) {
	if phase != "" {
		c.mu.Lock()
		c.recorded[fault.Key(node, pack, rule)] = recordedPhase{phase: phase, at: time.Now()}
		c.mu.Unlock()
	}
	c.record(ctx, node, pack, rule, nodefault.Change{Phase: phase, Probe: v})
}

// resolved marks the records of node's cleared faults (pack/rule ids) Resolved.
func (c *Controller) resolved(ctx context.Context, node string, ids []string, why string) {
	for _, id := range ids {
		pack, rule, ok := strings.Cut(id, "/")
		if !ok {
			continue
		}
		c.mu.Lock()
		delete(c.recorded, fault.Key(node, pack, rule))
		c.mu.Unlock()
		c.record(ctx, node, pack, rule, nodefault.Change{Phase: v1alpha1.PhaseResolved, Message: why, Decision: "untaint"})
	}
}

// checkPlacing settles the taint entries a writer left in Placing (see
// act.CheckPlacing): at the start of a term for any age (the previous leader is
// gone), in Reconcile for those older than a minute.
func (c *Controller) checkPlacing(ctx context.Context, minAge time.Duration) {
	adopted, cleared, err := c.actor.CheckPlacing(ctx, minAge)
	if err != nil {
		c.m.recordErrors.Inc()
		c.log.Warn("taints being placed not checked", "err", err)
	}
	if len(adopted) > 0 || len(cleared) > 0 {
		c.log.Info("taints a writer was placing checked against the Nodes", "adopted", adopted, "cleared", cleared)
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
		if st.Phase != v1alpha1.PhaseHeld && !(st.Phase == v1alpha1.PhaseConfirming && confirmInFlight(st)) {
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
		c.updateGauges()
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

// collectResolved deletes the records resolved longer than the retention ago.
func (c *Controller) collectResolved(ctx context.Context) {
	n, err := c.records.Collect(ctx)
	if err != nil {
		c.m.recordErrors.Inc()
		c.log.Warn("resolved NodeFaults not collected", "err", err)
	}
	if n > 0 {
		c.log.Info("collected resolved NodeFaults past their retention", "deleted", n)
	}
}

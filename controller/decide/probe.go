package decide

import (
	"github.com/faultline-dev/faultline/controller/fault"
)

// ProbeOutcome is what the confirming probes of a rule came to.
type ProbeOutcome int

// Probe outcomes.
const (
	// ProbesPassed: no check failed.
	ProbesPassed ProbeOutcome = iota
	// ProbesFailed: a check failed.
	ProbesFailed
	// ProbesTimedOut: no verdict in time; the rule's probe.onTimeout decides.
	ProbesTimedOut
	// ProbesAwaitingIdle: the harmless checks found nothing and the invasive ones
	// wait for the pods holding the node's GPUs (probe.whileBusy: taint-unconfirmed).
	ProbesAwaitingIdle
)

// OutcomeOf is the outcome of a run judged failed or timed out (neither: passed).
func OutcomeOf(failed, timedOut bool) ProbeOutcome {
	switch {
	case failed:
		return ProbesFailed
	case timedOut:
		return ProbesTimedOut
	}
	return ProbesPassed
}

// ProbeResult is the result a KindProbe decision asked for.
type ProbeResult struct {
	Outcome ProbeOutcome
	// AfterIdleWait: the invasive checks of a fault that waited for idle GPUs. While
	// the node carries the rule's taint (the unconfirmed one) a failure confirms it
	// in place: the node keeps its place in the budget.
	AfterIdleWait bool
}

// DecideProbe decides on the result of the probes a KindProbe decision asked for:
//   - a failure (or a timeout, when the rule's probe.onTimeout is "taint") goes the
//     way of a taint (budget, rule budget, storm, fleet), or, after an idle wait
//     under the unconfirmed taint, makes that taint the rule's own (KindTaint, which
//     climbs the ladder);
//   - waiting for idle GPUs (ProbesAwaitingIdle) goes the way of a taint too,
//     marked Unconfirmed: it takes a node away from new work like any other, and
//     climbs no ladder; a hold's release asks for the probes again;
//   - a pass is KindNone and clears a held fault of the same key.
func (d *Decider) DecideProbe(f fault.Fault, r ProbeResult, facts NodeFacts) Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if f.Rule == nil {
		return d.finish(Decision{Kind: KindNone, Fault: f, Message: "fault has no rule"}, false, now)
	}
	d.grants.expire(now, d.cfg.PendingTTL)
	d.storms.refresh(now)
	// The mode may have dropped while the probes ran (a pack reload).
	if dec, ok := d.staged(f); ok {
		return d.finish(dec, false, now)
	}
	timeoutTaints := r.Outcome == ProbesTimedOut && f.Rule.Probe.OnTimeout == "taint"
	switch {
	case r.Outcome == ProbesAwaitingIdle:
		dec := d.taintPath(f, facts)
		if dec.Kind == KindTaint || dec.Kind == KindAlreadyTainted {
			dec.Unconfirmed = true
		}
		dec.Message = "invasive probes wait for idle GPUs, taint unconfirmed; " + dec.Message
		return d.finish(dec, false, now)
	case (r.Outcome == ProbesFailed || timeoutTaints) && r.AfterIdleWait && d.grants.hasRuleTaint(f.Node, f.Rule.String(), facts):
		msg := "invasive probes failed: the unconfirmed taint is confirmed"
		if timeoutTaints {
			msg = "invasive probes reached no verdict (onTimeout: taint): the unconfirmed taint is confirmed"
		}
		return d.finish(Decision{Kind: KindTaint, Fault: f, Message: msg}, true, now)
	case r.Outcome == ProbesFailed:
		dec := d.taintPath(f, facts)
		dec.Message = "probes failed; " + dec.Message
		return d.finish(dec, true, now)
	case timeoutTaints:
		dec := d.taintPath(f, facts)
		dec.Message = "probes timed out (onTimeout: taint); " + dec.Message
		return d.finish(dec, true, now)
	case r.Outcome == ProbesTimedOut:
		return d.finish(Decision{Kind: KindNone, Fault: f,
			Message: "probes timed out; onTimeout: " + f.Rule.Probe.OnTimeout}, false, now)
	}
	msg := "probes passed"
	if !d.cfg.DryRun && d.held.remove(f.Key()) != nil {
		d.st.heldCleared++
		msg += "; the held fault is cleared"
	}
	return d.finish(Decision{Kind: KindNone, Fault: f, Message: msg}, false, now)
}

package decide

import (
	"github.com/faultline-dev/faultline/controller/fault"
)

// DecideUnconfirmed decides on a fault of a probe rule whose harmless checks found
// nothing while its invasive ones wait for the pods holding the node's GPUs
// (probe.whileBusy: taint-unconfirmed). The unconfirmed taint takes the taint's way
// (budget, rule budget, storm, fleet) as a failed probe's would: it takes a node
// away from new work like any other. A hold's release asks for the probes again.
func (d *Decider) DecideUnconfirmed(f fault.Fault, facts NodeFacts) Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if f.Rule == nil {
		return d.finish(Decision{Kind: KindNone, Fault: f, Message: "fault has no rule"}, false, now)
	}
	d.grants.expire(now, d.cfg.PendingTTL)
	d.storms.refresh(now)
	if dec, ok := d.staged(f); ok {
		return d.finish(dec, false, now)
	}
	dec := d.taintPath(f, facts)
	if dec.Kind == KindTaint || dec.Kind == KindAlreadyTainted {
		dec.Unconfirmed = true
	}
	dec.Message = "invasive probes wait for idle GPUs, taint unconfirmed; " + dec.Message
	return d.finish(dec, false, now)
}

// DecideConfirmed decides on the invasive checks of a fault that waited for idle
// GPUs under an unconfirmed taint, once they failed (or reached no verdict with
// onTimeout: taint): the node keeps its place in the budget and the taint becomes
// the rule's own (KindTaint, which climbs the ladder). Without the unconfirmed
// taint on the node (whileBusy: wait, or removed meanwhile) it is
// DecideProbeResult's.
func (d *Decider) DecideConfirmed(f fault.Fault, timedOut bool, facts NodeFacts) Decision {
	d.mu.Lock()
	if f.Rule == nil || !d.grants.hasRuleTaint(f.Node, f.Rule.String(), facts) {
		d.mu.Unlock()
		return d.DecideProbeResult(f, !timedOut, timedOut, facts)
	}
	defer d.mu.Unlock()
	now := d.now()
	if dec, ok := d.staged(f); ok {
		return d.finish(dec, false, now)
	}
	msg := "invasive probes failed: the unconfirmed taint is confirmed"
	if timedOut {
		msg = "invasive probes reached no verdict (onTimeout: taint): the unconfirmed taint is confirmed"
	}
	return d.finish(Decision{Kind: KindTaint, Fault: f, Message: msg}, true, now)
}

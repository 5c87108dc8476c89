package replay

import (
	"slices"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// ladder is one fault's climb of its rule's escalation ladder, as the controller
// keeps it in the fault's NodeFault record.
type ladder struct {
	fault fault.Fault // the latest firing
	l     decide.Ladder
	// probe: the next step waits for a failed confirming probe, reported once as
	// needs-probe; the climb stops there.
	probe bool
}

// fire notes a firing of a laddered fault and climbs its ladder, as the
// controller's escalate.Ladders.Fire does: the firing's boot is that of its line, else the
// node's newest.
func (r *run) fire(f fault.Fault) error {
	key := f.Key()
	lad := r.ladders[key]
	if lad == nil {
		lad = &ladder{}
		r.ladders[key] = lad
	}
	lad.fault = f
	var boot string
	if n := len(f.Evidence); n > 0 {
		boot = f.Evidence[n-1].Labels[logstream.MetaBootID]
	}
	if boot == "" {
		boot = r.boots[f.Node]
	}
	lad.l.Fire(decide.Firing{Time: f.Time, BootID: boot})
	return r.climb(key)
}

// climbing lists the ladders that may climb: those of tainted faults, sorted (a
// replay is deterministic).
func (r *run) climbing() []string {
	var out []string
	for key, lad := range r.ladders {
		if !lad.probe && r.taints[key] != nil {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// climb takes the step of the fault's ladder that is due now, if any, through
// the decider's brakes (the controller's climb): a step taken is done (a replay
// does not drain, reset or remediate, so none waits or fails), a held one or one
// below enforce is tried again later. A step whose trigger is a failed confirming
// probe cannot be decided from logs: it is reported as needs-probe, and the
// ladder stops there.
func (r *run) climb(key string) error {
	lad, t := r.ladders[key], r.taints[key]
	if lad == nil || t == nil || lad.probe {
		return nil // the ladder climbs from the taint
	}
	if stop, err := r.needsProbe(lad); stop || err != nil {
		return err
	}
	f := lad.fault
	l := lad.l
	l.TaintedSince = t.since
	s, ok := decide.NextStep(f.Rule.Escalate, l, r.now)
	if !ok {
		return nil
	}
	d := r.dec.Escalate(f, s, r.facts)
	done := d.Kind == decide.KindEscalate
	if done && s.Action == rules.StepTaint {
		r.taint(f)
	}
	lad.l.Reach(s, done, r.now)
	if err := r.res.add(d, r.now); err != nil || !done {
		return err
	}
	_, err := r.needsProbe(lad)
	return err
}

// needsProbe reports, once, a next step whose trigger is a failed confirming
// probe, and says whether the climb stops there.
func (r *run) needsProbe(lad *ladder) (bool, error) {
	if lad.probe {
		return true, nil
	}
	steps, i := lad.fault.Rule.Escalate, lad.l.Reached
	if (i > 0 && !lad.l.Done) || i >= len(steps) || !steps[i].ProbeFailed {
		return false, nil
	}
	lad.probe = true
	s := &StepRef{Step: i + 1, Action: steps[i].Action, Why: "waits for a failed confirming probe: probes are not run in a replay"}
	return true, r.res.put(lad.fault, OutcomeNeedsProbe, s, s.Why, r.now)
}

// nextDue is the earliest time after now at which a taintedFor step of a climbing
// ladder falls due; ok is false when none waits for one.
func (r *run) nextDue() (due time.Time, ok bool) {
	for key, lad := range r.ladders { // every line asks: no sorting, no allocation
		if lad.probe || r.taints[key] == nil {
			continue
		}
		steps := lad.fault.Rule.Escalate
		i := lad.l.Reached
		if lad.l.Reached > 0 && !lad.l.Done || i >= len(steps) || steps[i].TaintedFor <= 0 {
			continue
		}
		at := r.taints[key].since.Add(steps[i].TaintedFor.D())
		if at.After(r.now) && (!ok || at.Before(due)) {
			due, ok = at, true
		}
	}
	return due, ok
}

// advance moves the replay's clock to each taintedFor step that falls due before
// to and reconciles there, as the controller's periodic reconcile would have, so
// that such a step is dated when it fell due, not at the next line.
func (r *run) advance(to time.Time) error {
	if r.now.IsZero() {
		return nil
	}
	for {
		due, ok := r.nextDue()
		if !ok || due.After(to) {
			return nil
		}
		r.now = due
		if err := r.reconcile(); err != nil {
			return err
		}
	}
}

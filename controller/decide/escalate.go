package decide

import (
	"fmt"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

// KindEscalate: take the escalation step Decision.Step of the fault's rule.
const KindEscalate Kind = "escalate"

// Step is an escalation step a decision asks for.
type Step struct {
	// Index is the step's place in the rule's ladder (0-based).
	Index int
	rules.Step
	// Why is the trigger that made the step due.
	Why string
}

// Firing is one firing of a rule on a node, as a fault's record keeps it.
type Firing struct {
	Time   time.Time
	BootID string
}

// Ladder is what a fault's record says about its climb of its rule's ladder: the
// input of NextStep.
type Ladder struct {
	// Reached is the number of steps reached (0: none yet); Done says whether the
	// last one reached was carried out (a waiting, held or failed step is tried
	// again before the next one).
	Reached int
	Done    bool
	// Since is when the last step was reached or, before the first, when the fault
	// was first acted on (its taint).
	Since time.Time
	// TaintedSince is when the node got the rule's taint; zero when it does not
	// carry it.
	TaintedSince time.Time
	// Firings are the rule's firings on the node, oldest first.
	Firings []Firing
	// ProbeFailed is the time of the last failed confirming probe; zero if none.
	ProbeFailed time.Time
}

// MaxFirings bounds Ladder.Firings, as a fault's record keeps them: the repeat
// and reboots triggers look at no more.
const MaxFirings = 32

// Laddered says whether decision d feeds its fault's ladder: a firing of a rule
// with escalation steps on a node the rule taints or tainted (the ladder climbs
// from the taint).
func Laddered(d Decision) bool {
	return d.Fault.Rule != nil && len(d.Fault.Rule.Escalate) > 0 && !d.Unconfirmed &&
		(d.Kind == KindTaint || d.Kind == KindAlreadyTainted)
}

// Fire notes a firing of the rule on the node, as the fault's record does: the
// first one starts the climb (Since), and only the newest MaxFirings are kept.
func (l *Ladder) Fire(f Firing) {
	if l.Reached == 0 && len(l.Firings) == 0 {
		l.Since = f.Time
	}
	l.Firings = append(l.Firings, f)
	if n := len(l.Firings); n > MaxFirings {
		l.Firings = slices.Delete(l.Firings, 0, n-MaxFirings)
	}
}

// Reach notes that step s was reached at t, and whether it was carried out; a
// step reached again (a retry of a held or waiting one) keeps the time it was
// first reached, as the fault's record does.
func (l *Ladder) Reach(s Step, done bool, t time.Time) {
	if l.Reached != s.Index+1 {
		l.Since = t
	}
	l.Reached, l.Done = s.Index+1, done
}

// NextStep says which step of steps is due for a fault in state l at now, and why:
// the step reached, again, while it is not done; else the next one when its trigger
// holds. The repeat, reboots and probeFailed triggers count what happened after
// Since; taintedFor counts from the taint. ok is false when no step is due. It is
// pure: the same input gives the same answer.
func NextStep(steps []rules.Step, l Ladder, now time.Time) (s Step, ok bool) {
	if l.Reached > 0 && !l.Done && l.Reached <= len(steps) {
		i := l.Reached - 1
		return Step{Index: i, Step: steps[i], Why: "step " + fmt.Sprint(l.Reached) + " not done yet: tried again"}, true
	}
	i := l.Reached
	if i >= len(steps) {
		return Step{}, false
	}
	st := steps[i]
	due := func(why string) (Step, bool) { return Step{Index: i, Step: st, Why: why}, true }
	switch {
	case st.Repeat != nil:
		from := now.Add(-st.Repeat.Window.D())
		if l.Since.After(from) {
			from = l.Since
		}
		n := 0
		for _, f := range l.Firings {
			if f.Time.After(from) && !f.Time.After(now) {
				n++
			}
		}
		if n >= st.Repeat.Count {
			return due(fmt.Sprintf("fired %d time(s) within %s after step %d", n, st.Repeat.Window.D(), l.Reached))
		}
	case st.Reboots > 0:
		// The boots the rule fired in, counted from the one it fired in at Since: a
		// firing after Since in a boot that is the Nth after it.
		boots := []string{}
		seen := map[string]bool{}
		last := time.Time{}
		for _, f := range l.Firings {
			if f.BootID == "" || seen[f.BootID] {
				continue
			}
			seen[f.BootID] = true
			boots = append(boots, f.BootID)
			last = f.Time
		}
		if len(boots)-1 >= st.Reboots && last.After(l.Since) {
			return due(fmt.Sprintf("fired again after %d reboot(s) (boot %s)", len(boots)-1, boots[len(boots)-1]))
		}
	case st.ProbeFailed:
		if !l.ProbeFailed.IsZero() && l.ProbeFailed.After(l.Since) {
			return due("a confirming probe failed at " + l.ProbeFailed.UTC().Format(time.RFC3339))
		}
	case st.TaintedFor > 0:
		if !l.TaintedSince.IsZero() && now.Sub(l.TaintedSince) >= st.TaintedFor.D() {
			return due(fmt.Sprintf("tainted for %s without recovery", now.Sub(l.TaintedSince).Round(time.Second)))
		}
	}
	return Step{}, false
}

// Escalate decides whether step s of f's rule may be taken now. A step that takes
// capacity (all but service) passes the brakes of a taint: the node's opt-out, the
// rule's storm hold, the rule budget and the global budget (a node faultline
// already tainted uses no more of them, so a ladder that climbs from a taint is
// held by the storm or the opt-out, or by budgets the view is over). A rule below
// mode enforce only records the step it would take (KindAnnotate or KindObserve).
// A held step is not queued: the caller asks again when the trigger is checked
// again (the reconcile loop does, periodically).
func (d *Decider) Escalate(f fault.Fault, s Step, facts NodeFacts) Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.grants.expire(now, d.cfg.PendingTTL)
	d.storms.refresh(now)
	key := f.Rule.String()
	msg := fmt.Sprintf("step %d (%s) of %s: %s", s.Index+1, s.Action, key, s.Why)
	dec := Decision{Kind: KindEscalate, Fault: f, Mode: d.Mode(f.Rule), Message: msg}
	dec.Step = &s
	switch dec.Mode {
	case rules.ModeObserve:
		dec.Kind, dec.Message = KindObserve, msg+": counted, not taken (mode observe)"
	case rules.ModeAnnotate:
		dec.Kind, dec.Message = KindAnnotate, msg+": recorded, not taken (mode annotate)"
	}
	if dec.Kind == KindEscalate && s.Action.TakesCapacity() {
		dec = d.stepBrakes(dec, facts)
	}
	if d.cfg.DryRun && dec.Kind != KindObserve && dec.Kind != KindAnnotate {
		return d.st.asDryRun(dec)
	}
	d.st.decisions[dec.Kind]++
	switch dec.Kind {
	case KindHold:
		d.st.holds[dec.Reason]++
	case KindEscalate:
		if s.Action == rules.StepTaint {
			d.grants.grant(f, now)
		}
	}
	return dec
}

// stepBrakes holds a step that takes capacity when a taint would be held.
func (d *Decider) stepBrakes(dec Decision, facts NodeFacts) Decision {
	f := dec.Fault
	key := f.Rule.String()
	hold := func(r HoldReason, why string) Decision {
		dec.Kind, dec.Reason, dec.Message = KindHold, r, dec.Message+": held: "+why
		return dec
	}
	if facts.OptedOut[f.Node] {
		return hold(ReasonOptedOut, "node is labelled "+fault.LabelOptOut+"=true")
	}
	if s := d.storms.get(key); s.holding() {
		return hold(ReasonStorm, s.describe(key))
	}
	if dec.Step.Action == rules.StepTaint && d.grants.hasRuleTaint(f.Node, key, facts) {
		return dec // the taint is there: the step is done by itself
	}
	if lim, ok := d.cfg.RuleBudgets[key]; ok && !d.grants.hasRuleTaint(f.Node, key, facts) {
		if n := d.grants.ruleNodes(key, facts); n >= lim {
			return hold(ReasonRuleBudget, fmt.Sprintf("rule budget of %s exhausted: %d of %d nodes carry its taint", key, n, lim))
		}
	}
	used := d.grants.used(facts)
	budget := d.cfg.Budget(facts.Eligible)
	if (used[f.Node] && len(used) > budget) || (!used[f.Node] && len(used) >= budget) {
		return hold(ReasonBudget, fmt.Sprintf("budget exhausted: %d of %d nodes tainted by faultline", len(used), budget))
	}
	return dec
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/actqueue"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/trigger"
)

// DefaultActWorkers is how many decisions are carried out at once by default: a
// taint is a few API round trips, so a burst is bound by their latency with too few
// workers and by the client's rate limit (--kube-api-qps) with enough. At 16, a
// 1,000-node burst was bound by the round trips of a busy apiserver; at 256 it was
// decided in 11 to 15 s where 64 took 18 to 23 s (docs/scale.md).
const DefaultActWorkers = 256

// actLimit bounds the decisions waiting for a worker: past it the line reader waits
// (back-pressure) instead of holding an unbounded backlog in memory.
func actLimit(workers int) int { return max(1024, 64*workers) }

// carrier makes the decisions and carries them out: every decision, whether on a
// line, a held fault released or a probe's verdict, goes through the term's action
// queue (one task at a time per node, in decision order) and is reported (Event,
// NodeFault record, metric, log).
type carrier struct {
	decider   *decide.Decider
	actor     *act.Actor
	rec       *recorder
	fleet     *fleetBook
	gauges    *gauges
	triggers  *trigger.Triggers
	decisions *prometheus.CounterVec
	log       *slog.Logger
	// ladder counts a firing of a fault whose rule has an escalation ladder.
	ladder func(context.Context, fault.Fault)

	mu sync.Mutex
	q  *actqueue.Queue // the term's queue; nil between terms

	// decideMu makes the decisions one at a time (decide, and admit's decisions
	// made again).
	decideMu sync.Mutex
}

// term starts (q) or ends (nil) a term's queue.
func (k *carrier) term(q *actqueue.Queue) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.q = q
}

// decide decides a fault, one at a time: the budget and the storm hold see every
// earlier decision.
func (k *carrier) decide(f fault.Fault, facts factsReader, decider faultDecider) (decide.Decision, error) {
	k.decideMu.Lock()
	defer k.decideMu.Unlock()
	nf, err := facts.Facts()
	if err != nil {
		return decide.Decision{}, err
	}
	return decider.Decide(f, nf), nil
}

// notApplied frees the budget a taint decision reserved when the taint was not
// placed. A decision that found the fault "already tainted" on that reservation
// alone cannot place the taint without budget: admit decides it again.
func (k *carrier) notApplied(f fault.Fault) { k.decider.Taints().NotApplied(f) }

// submit carries out a decision made off the line path (a held fault released, a
// probe's verdict) through the term's queue, after the node's earlier decisions,
// and waits for room; between terms (no queue: this replica does not lead) it is
// carried out at once, as a probe verdict arriving then still must be.
func (k *carrier) submit(ctx context.Context, d decide.Decision) {
	k.mu.Lock()
	q := k.q
	k.mu.Unlock()
	if q == nil {
		if rest := k.apply(ctx, d); rest != nil {
			rest(ctx)
		}
		return
	}
	line := q.Begin()
	if err := q.Add(ctx, line, d.Fault.Node, func(ctx context.Context) actqueue.Task { return k.apply(ctx, d) }); err != nil {
		k.log.Warn("decision not queued: the term ended", "node", d.Fault.Node, "rule", d.Fault.Rule.String(), "kind", d.Kind, "err", err)
	}
	q.End(line)
}

// exclusive runs do through node's place in the term's queue, after the node's
// decisions waiting and their books, and waits for it; between terms (no queue) at
// once. Writes to a node off the decisions' path (untaints asked for, recoveries,
// unconfirmed taints ended) go through it, so none lands between a decision's fence
// and its books (see apply).
func (k *carrier) exclusive(ctx context.Context, node string, do func(ctx context.Context)) error {
	k.mu.Lock()
	q := k.q
	k.mu.Unlock()
	if q == nil {
		do(ctx)
		return nil
	}
	return q.Do(ctx, node, do)
}

// admit is PlaceTaint's admission of f's taint on a node found without it: a grant
// of the budget for it stands (the decision's own, or an earlier decision's whose
// taint is still on its way), or f is decided again, on facts without that taint,
// and the new decision is carried out instead (a *redecided). So a decision made on
// a view that still showed a taint removed since ("already tainted", from a cache
// behind an untaint), or whose grant an untaint freed meanwhile, takes the budget
// as a new taint does, and never adds a node beyond it.
func (k *carrier) admit(f fault.Fault) func() error {
	return func() error {
		k.decideMu.Lock()
		defer k.decideMu.Unlock()
		key := f.Rule.String()
		if k.decider.Taints().Granted(f.Node, key) {
			return nil
		}
		facts, err := k.actor.Facts()
		if err != nil {
			return fmt.Errorf("node facts: %w", err)
		}
		return &redecided{d: k.decider.Decide(f, facts.Without(f.Node, key))}
	}
}

// redecided is admit's answer when the fault was decided again: d replaces the
// decision being carried out.
type redecided struct{ d decide.Decision }

func (r *redecided) Error() string {
	return fmt.Sprintf("taint of %s not on %s and not granted: decided again (%s)", r.d.Fault.Rule, r.d.Fault.Node, r.d.Kind)
}

// outcome is what a decision's report says: its metric's kind and result, its
// Event, and what else follows it.
type outcome struct {
	kind, result string
	recorded     bool // the decision went to the record with the taint's Placed
	// The decision's Event, posted once the record is written: a new fault's record
	// exists by then, and the Event goes on it as well as on the Node.
	reason, msg string
	confirm     bool // the probes run once the record says Confirming
}

// apply carries a decision out in two parts: at once what fences the node (a
// taint's record Placing and the Node update), and, returned as the rest, its
// bookkeeping: the record's Placed and decision, Events, metric and log. Queued,
// the rest runs once no other decision waits (actqueue.Task): a burst's nodes are
// all fenced before the API server spends its time on the burst's books.
// A failed taint is reported at once, its budget freed for the next decisions.
func (k *carrier) apply(ctx context.Context, d decide.Decision) actqueue.Task {
	if d.Kind == decide.KindAlreadyTainted && k.triggers.AwaitingIdle(d.Fault.Key()) {
		// Fired again under its unconfirmed taint: it stays unconfirmed.
		d.Unconfirmed = true
	}
	f := d.Fault
	o := outcome{kind: string(d.Kind), result: "ok"}
	var pt *act.Placement
	switch d.Kind {
	case decide.KindTaint, decide.KindAlreadyTainted:
		if d.Kind == decide.KindAlreadyTainted && !k.rec.store.RefreshDue(f.Key()) {
			o.result = "recent"
			break
		}
		boot, _ := k.actor.BootID(f.Node)
		ch, due := k.rec.change(d, d.Message)
		placed := f
		if d.Unconfirmed {
			placed = act.Unconfirmed(f)
		}
		var err error
		if pt, err = k.actor.PlaceTaint(ctx, placed, boot, ch, k.admit(f)); err != nil {
			var again *redecided
			if errors.As(err, &again) {
				if due {
					k.rec.store.Undue(f.Key())
				}
				k.log.Info("decided again: the node no longer carries the taint", "node", f.Node, "rule", f.Rule.String(),
					"was", d.Kind, "now", again.d.Kind)
				return k.apply(ctx, again.d)
			}
			k.taintFailed(f, due, &o, err)
			k.report(ctx, d, o)
			return nil
		}
		o.recorded = due
	case decide.KindEvent:
		o.reason, o.msg = act.ReasonEvent, fmt.Sprintf("%s (%s): %s; %s", f.Rule, f.Rule.Severity, f.Rule.Description, f.LastLine())
	case decide.KindProbe:
		// The taint waits for the probes; the line stream does not.
		o.reason, o.msg = act.ReasonEvent, fmt.Sprintf("%s: running probes %v to confirm; %s", f.Rule, f.Rule.Probe.Checks, f.LastLine())
		if !k.triggers.On() {
			o.msg = fmt.Sprintf("%s asks for probes %v, but probes are not configured; applying onTimeout=%s",
				f.Rule, f.Rule.Probe.Checks, f.Rule.Probe.OnTimeout)
		}
		o.confirm = true
	case decide.KindHold:
		o.reason = act.ReasonHeld
		if d.Reason == decide.ReasonStorm {
			o.reason = act.ReasonStormHold
		}
		o.kind = "hold-" + string(d.Reason)
		o.msg = fmt.Sprintf("%s held (%s): %s", f.Rule, d.Reason, d.Message)
		k.log.Warn("fault held", "node", f.Node, "rule", f.Rule.String(), "reason", d.Reason, "message", d.Message)
		if d.Reason == decide.ReasonFleet {
			k.fleet.sync(ctx)
		}
	case decide.KindDryRun:
		o.kind = "dry-run-" + string(d.Of)
		o.reason, o.msg = act.ReasonDryRun, fmt.Sprintf("dry-run: would %s for %s: %s", d.Of, f.Rule, f.LastLine())
	case decide.KindAnnotate:
		o.reason, o.msg = act.ReasonAnnotated, fmt.Sprintf("%s: %s; %s", f.Rule, d.Message, f.LastLine())
	case decide.KindObserve:
		// Counted by the metric; the log is the only other trace.
		k.log.Info("observed", "node", f.Node, "rule", f.Rule.String(), "action", f.Rule.Action, "count", f.Count, "message", d.Message)
	case decide.KindNone:
	}
	// Refresh the gauges when a taint or a hold changed them, not on every Event
	// (Reconcile refreshes them periodically too), coalesced: a burst carried out
	// by many workers refreshes them a few times, not once per decision.
	if d.Kind == decide.KindTaint || d.Kind == decide.KindHold {
		k.gauges.due()
	}
	return func(ctx context.Context) actqueue.Task {
		if pt != nil {
			// The actor records the FaultTainted Event with the evidence.
			if res, err := pt.Settle(ctx); err != nil {
				k.taintFailed(f, o.recorded, &o, err)
			} else {
				k.log.Info("tainted", "node", f.Node, "rule", f.Rule.String(), "added", res.Added, "count", f.Count)
			}
		}
		k.report(ctx, d, o)
		return nil
	}
}

// taintFailed reports a taint not applied (or applied without its records written)
// and frees the budget it reserved.
func (k *carrier) taintFailed(f fault.Fault, due bool, o *outcome, err error) {
	if due {
		k.rec.store.Undue(f.Key())
	}
	o.result = "error"
	if errors.Is(err, act.ErrOptedOut) {
		o.result = "opted-out"
	}
	k.notApplied(f)
	k.log.Warn("taint not applied", "node", f.Node, "rule", f.Rule.String(), "err", err)
}

// report writes what a decision's outcome says: its record (unless the taint's
// write carried it), the probes it starts, its Event, its ladder and its metric.
func (k *carrier) report(ctx context.Context, d decide.Decision, o outcome) {
	f := d.Fault
	if o.result == "ok" && !o.recorded {
		k.rec.decision(ctx, d, d.Message)
	}
	if o.confirm {
		// Only now: a confirmation that ends fast (refused, errored) writes its
		// verdict after the Confirming record, not before it (it was then
		// overwritten, and the fault stayed Confirming).
		go k.triggers.Confirm(ctx, f)
	}
	if o.reason != "" {
		k.event(ctx, f, o.reason, o.msg)
	}
	// Every firing counts on a ladder, those whose evidence write is skipped too.
	if decide.Laddered(d) && (o.result == "ok" || o.result == "recent") {
		k.ladder(ctx, f)
	}
	k.decisions.WithLabelValues(o.kind, o.result, string(d.Mode)).Inc()
}

func (k *carrier) event(ctx context.Context, f fault.Fault, reason, msg string) {
	if err := k.actor.Event(ctx, f.Node, f, reason, msg); err != nil {
		k.log.Warn("event not recorded", "node", f.Node, "reason", reason, "err", err)
	}
}

// gauges refreshes the controller's gauges from the facts the informers keep
// indexed and the decider's state: its cost follows the faults, not the fleet.
type gauges struct {
	actor   *act.Actor
	decider *decide.Decider
	m       *Metrics
	ch      chan struct{} // asks loop for a refresh
}

// due asks loop for a refresh.
func (g *gauges) due() {
	select {
	case g.ch <- struct{}{}:
	default:
	}
}

// loop refreshes the gauges when asked, at most every gaugeEvery (a refresh reads
// the indexed facts and walks the held faults).
func (g *gauges) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.ch:
			g.update()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gaugeEvery):
		}
	}
}

const gaugeEvery = 250 * time.Millisecond

// update sets the gauges now.
func (g *gauges) update() {
	facts, err := g.actor.Facts()
	if err != nil {
		return
	}
	g.m.taintedNodes.Set(float64(len(facts.Tainted)))
	g.m.budgetLeft.Set(float64(g.decider.Taints().Left(facts)))
	g.m.eligibleNodes.Set(float64(facts.Eligible))
	held := map[string]int{}
	for _, h := range g.decider.Held() {
		held[string(h.Reason)]++
	}
	for _, r := range []decide.HoldReason{decide.ReasonBudget, decide.ReasonRuleBudget, decide.ReasonStorm, decide.ReasonOptedOut,
		decide.ReasonFleet, decide.ReasonGroupBudget} {
		g.m.held.WithLabelValues(string(r)).Set(float64(held[string(r)]))
	}
	// Reset first: a released or ended storm's rule leaves the gauge.
	g.m.storms.Reset()
	for _, rule := range g.decider.Storms().Active() {
		g.m.storms.WithLabelValues(rule).Set(1)
	}
}

package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

func (c *Controller) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.ReconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Reconcile(ctx)
		case <-c.kickCh:
			c.Reconcile(ctx)
		}
	}
}

// Reconcile clears faults whose recovery policy allows it, notices taints removed by
// hand, and applies held faults there is now room for.
func (c *Controller) Reconcile(ctx context.Context) {
	c.shard.settle()
	c.rec.checkPlacing(ctx, time.Minute)
	c.desk.answer(ctx)
	active, err := c.actor.ListActive()
	if err != nil {
		c.log.Warn("reconcile", "err", err)
		return
	}
	now := time.Now()
	for _, nf := range active {
		boot, _ := c.actor.BootID(nf.Node)
		for _, rec := range nf.Faults {
			if !rec.Status.OwnsTaint() || rec.Status.Phase == v1alpha1.PhaseAwaitingIdle {
				continue // an unconfirmed taint goes with its confirmation, not by recovery
			}
			last := c.seen.get(fault.Key(nf.Node, rec.Spec.Pack, rec.Spec.Rule))
			if t := rec.Status.Seen(); last.Before(t) {
				last = t
			}
			af := decide.ActiveFault{Node: nf.Node, Rule: c.packs.Engine().Set().Rule(rec.Spec.Pack, rec.Spec.Rule), Record: rec}
			af.ProbesPassed = c.triggers.Recovery(ctx, af, boot, last, now)
			ok, why := c.decider.Recoverable(af, now, boot, last)
			if !ok {
				continue
			}
			if _, err := c.untaintNode(ctx, nf.Node, rec.PackRule()); err != nil {
				c.log.Warn("recovery untaint failed", "node", nf.Node, "rule", rec.PackRule(), "err", err)
				continue
			}
			c.decider.Taints().Untainted(nf.Node, rec.PackRule())
			c.rec.resolved(ctx, nf.Node, []string{rec.PackRule()}, "recovered: "+why)
			c.m.decisions.WithLabelValues("untaint", "ok", untaintMode).Inc()
			c.log.Info("recovered", "node", nf.Node, "rule", rec.PackRule(), "why", why)
		}
	}
	seen := time.Now()
	facts, err := c.actor.Facts()
	if err != nil {
		return
	}
	// Taints removed by hand (faultline untaint, kubectl) free their budget now; a
	// taint decided since the last pass may still be on its way to the Node, and one
	// decided before it, being placed or placed and not yet in the cache, keeps its
	// budget too: the view of the last pass may have shown an older taint (since
	// removed) and not this one. Such a node's grants end with PendingTTL.
	tainted := map[string]bool{}
	for node := range facts.Tainted {
		tainted[node] = true
	}
	c.mu.Lock()
	before, at := c.tainted, c.taintedAt
	c.tainted, c.taintedAt = tainted, seen
	c.mu.Unlock()
	for node := range before {
		if len(facts.Tainted[node]) == 0 && c.actor.Settled(ctx, node) {
			c.decider.Taints().UntaintedBefore(node, at)
		}
	}
	c.triggers.SyncGPUHealth(ctx, facts)
	// Held faults are re-examined only once the leader has read the lines since its
	// saved position: the faults a previous leader held are resumed from their
	// records at once, but the storm and fleet state that held them is rebuilt from
	// those lines when the saved state is older than the hold (a leader that stopped
	// before saving it); released before, a fault a storm holds would be tainted as
	// a lone one.
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil || src.CaughtUp() {
		for _, d := range c.decider.Release(facts) {
			c.carrier.submit(ctx, d)
		}
	}
	c.fleet.sync(ctx)
	c.ladders.Reconcile(ctx)
	c.rec.collect(ctx)
	c.gauges.update()
}

// untaintMode is the mode label of untaint decisions: only enforce places taints,
// so removing one finishes an enforce decision, whatever the rule's mode is now.
const untaintMode = string(rules.ModeEnforce)

// kick asks the reconcile loop for a pass now (recovery probes passed).
func (c *Controller) kick() {
	select {
	case c.kickCh <- struct{}{}:
	default:
	}
}

// Untaint removes faultline's taint(s) from a node (rule "" or "*": all) and
// resolves their records with why: an operator's Resolve request.
func (c *Controller) Untaint(ctx context.Context, node, rule, why string) (act.Result, error) {
	if rule == "" {
		rule = act.AllRules
	}
	res, err := c.untaintNode(ctx, node, rule)
	if err != nil {
		return res, err
	}
	c.decider.Taints().Untainted(node)
	c.rec.resolved(ctx, node, res.Cleared, why)
	c.m.decisions.WithLabelValues("untaint", "ok", untaintMode).Inc()
	c.gauges.update()
	return res, nil
}

// untaintUnconfirmed removes the unconfirmed taint of a rule (pack/rule) whose
// invasive checks did not confirm it, and frees its budget; the trigger resolves the
// record with the probe's verdict.
func (c *Controller) untaintUnconfirmed(ctx context.Context, node, rule string) error {
	res, err := c.untaintNode(ctx, node, rule)
	if err != nil {
		return err
	}
	if len(res.Cleared) > 0 {
		c.decider.Taints().Untainted(node, rule)
		c.m.decisions.WithLabelValues("untaint", "ok", untaintMode).Inc()
		c.gauges.due()
	}
	return nil
}

// untaintNode is the Actor's UntaintNode through the node's place in the act queue
// (carrier.exclusive).
func (c *Controller) untaintNode(ctx context.Context, node, rule string) (act.Result, error) {
	var (
		res act.Result
		err error
	)
	if qerr := c.carrier.exclusive(ctx, node, func(ctx context.Context) { res, err = c.actor.UntaintNode(ctx, node, rule) }); qerr != nil {
		return act.Result{}, fmt.Errorf("untaint %s on %s: %w", rule, node, qerr)
	}
	return res, err
}

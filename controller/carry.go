package controller

import (
	"context"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
)

// DefaultActWorkers is how many decisions are carried out at once by default: a
// taint is a few API round trips, so a burst is bound by their latency with too few
// workers and by the client's rate limit (--kube-api-qps) with enough. At 16, a
// 1,000-node burst was bound by the round trips of a busy apiserver (docs/scale.md).
const DefaultActWorkers = 64

// actLimit bounds the decisions waiting for a worker: past it the line reader waits
// (back-pressure) instead of holding an unbounded backlog in memory.
func actLimit(workers int) int { return max(1024, 64*workers) }

// decideOne decides a fault, one at a time: the budget and the storm hold see every
// earlier decision. seq numbers the decision for carry (see notApplied).
func (c *Controller) decideOne(st stages, f fault.Fault) (decide.Decision, uint64, error) {
	c.decideMu.Lock()
	defer c.decideMu.Unlock()
	facts, err := st.facts.Facts()
	if err != nil {
		return decide.Decision{}, 0, err
	}
	d := st.decide.Decide(f, facts)
	c.decided++
	return d, c.decided, nil
}

// notApplied frees the budget a taint decision reserved when the taint was not
// placed. Decisions made before it may have found the fault "already tainted" on
// that reservation alone; carry skips them, so they cannot place the taint without
// budget.
func (c *Controller) notApplied(f fault.Fault) {
	c.decideMu.Lock()
	defer c.decideMu.Unlock()
	c.decider.NotApplied(f)
	if len(c.failed) >= maxFailedMarks {
		c.failed = map[string]uint64{} // the oldest are long carried out
	}
	c.failed[f.Key()] = c.decided
}

// maxFailedMarks bounds the taints remembered as failed.
const maxFailedMarks = 10000

// carry carries out decision number seq on a worker.
func (c *Controller) carry(ctx context.Context, d decide.Decision, seq uint64) {
	if d.Kind == decide.KindAlreadyTainted {
		c.decideMu.Lock()
		at, failed := c.failed[d.Fault.Key()]
		c.decideMu.Unlock()
		if failed && seq <= at {
			// Decided on the reservation of a taint that then failed: the node does
			// not carry it and no budget is held for it.
			c.m.decisions.WithLabelValues(string(d.Kind), "error", string(d.Mode)).Inc()
			c.log.Warn("taint not applied: the taint this decision counted on failed",
				"node", d.Fault.Node, "rule", d.Fault.Rule.String())
			return
		}
	}
	c.apply(ctx, d)
}

// gaugesDue asks gaugeLoop for a refresh of the gauges.
func (c *Controller) gaugesDue() {
	select {
	case c.gaugeCh <- struct{}{}:
	default:
	}
}

// gaugeLoop refreshes the gauges when asked, at most every gaugeEvery (a refresh
// reads the indexed facts and walks the held faults).
func (c *Controller) gaugeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.gaugeCh:
			c.updateGauges()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gaugeEvery):
		}
	}
}

const gaugeEvery = 250 * time.Millisecond

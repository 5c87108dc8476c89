package controller

import "github.com/faultline-dev/faultline/controller/nodefault"

// A sharded controller (act.Options.Shard) owns the nodes its label selector picks:
// it reads only their lines, counts only them in its budget and storm hold, and
// settles only their records. A node relabelled from one shard to another moves
// with its faults: the old shard forgets the faults it held for it, the new one
// takes them over from their NodeFault records (phase Held); a taint already placed
// stays, and the new shard's reconcile recovers it.

// owns says whether this controller decides the lines of node: a node of its shard,
// or one that left it since the last reconcile. Until then the node's new shard may
// not have seen it join (each shard's informer sees the relabelling at its own
// moment), and a line both shards decide is better than one neither does: a taint
// already placed is a no-op.
func (c *Controller) owns(node string) bool {
	if c.actor.Owns(node) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	joined, moved := c.moves[node]
	return moved && !joined
}

// noteMove is the Node informer's report of a node joining or leaving the shard;
// the next reconcile settles it (the informer must not wait on the decider).
func (c *Controller) noteMove(node string, joined bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading {
		return // a new term takes over its held faults from the records (resumeHeld)
	}
	if len(c.moves) >= maxMoves {
		// A relabelling of more nodes than this between two reconciles: the rest are
		// settled from their records at the next term (resumeHeld).
		c.m.shardMoves.WithLabelValues("dropped").Inc()
		return
	}
	c.moves[node] = joined
}

// maxMoves bounds the nodes noted between two reconciles.
const maxMoves = 100000

// settleMoves hands the held faults of the nodes that left the shard over to their
// new shard (forgotten here; their records stay Held) and takes over those of the
// nodes that joined. Only the leader decides; a replica that waits keeps nothing.
func (c *Controller) settleMoves() {
	c.mu.Lock()
	moves := c.moves
	c.moves = map[string]bool{}
	leading := c.leading
	c.mu.Unlock()
	if !leading || len(moves) == 0 {
		return
	}
	left := map[string]bool{}
	for node, joined := range moves {
		if !joined {
			left[node] = true
		}
	}
	if len(left) > 0 {
		for _, h := range c.decider.Held() {
			if left[h.Fault.Node] {
				c.decider.Forget(h.Fault.Key())
			}
		}
	}
	set := c.packs.Engine().Set()
	for node, joined := range moves {
		if !joined {
			c.decider.Untainted(node) // its grants count in its new shard's budget
			c.m.shardMoves.WithLabelValues("left").Inc()
			c.log.Info("node left the shard: its held faults go to its new shard", "node", node)
			continue
		}
		c.m.shardMoves.WithLabelValues("joined").Inc()
		taken := 0
		for _, nf := range c.actor.HeldRecords(node) {
			if f, ok := nodefault.FaultOf(set, nf); ok {
				c.decider.Restore(heldOf(f, nf.Status))
				taken++
			}
		}
		c.log.Info("node joined the shard", "node", node, "held_faults_taken_over", taken)
	}
}

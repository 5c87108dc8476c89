package controller

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/rules"
)

// A sharded controller (act.Options.Shard) owns the nodes its label selector picks:
// it reads only their lines, counts only them in its budget and storm hold, and
// settles only their records. A node relabelled from one shard to another moves
// with its faults: the old shard forgets the faults it held for it, the new one
// takes them over from their NodeFault records (phase Held); a taint already placed
// stays, and the new shard's reconcile recovers it.

// shard follows the nodes that join and leave this controller's shard between two
// reconciles, and settles their held faults.
type shard struct {
	actor   *act.Actor
	decider *decide.Decider
	set     func() *rules.Set
	moved   *prometheus.CounterVec
	log     *slog.Logger

	mu      sync.Mutex
	leading bool
	moves   map[string]bool // nodes that joined (true) or left (false) since the last reconcile
}

// lead starts (true) or ends a term: moves are noted only while leading.
func (s *shard) lead(leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leading, s.moves = leading, map[string]bool{}
}

// owns says whether this controller decides the lines of node: a node of its shard,
// or one that left it since the last reconcile. Until then the node's new shard may
// not have seen it join (each shard's informer sees the relabelling at its own
// moment), and a line both shards decide is better than one neither does: a taint
// already placed is a no-op.
func (s *shard) owns(node string) bool {
	if s.actor.Owns(node) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	joined, moved := s.moves[node]
	return moved && !joined
}

// note is the Node informer's report of a node joining or leaving the shard;
// the next reconcile settles it (the informer must not wait on the decider).
func (s *shard) note(node string, joined bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leading {
		return // a new term takes over its held faults from the records (resumeHeld)
	}
	if len(s.moves) >= maxMoves {
		// A relabelling of more nodes than this between two reconciles: the rest are
		// settled from their records at the next term (resumeHeld).
		s.moved.WithLabelValues("dropped").Inc()
		return
	}
	s.moves[node] = joined
}

// maxMoves bounds the nodes noted between two reconciles.
const maxMoves = 100000

// settle hands the held faults of the nodes that left the shard over to their
// new shard (forgotten here; their records stay Held) and takes over those of the
// nodes that joined. Only the leader decides; a replica that waits keeps nothing.
func (s *shard) settle() {
	s.mu.Lock()
	moves := s.moves
	s.moves = map[string]bool{}
	leading := s.leading
	s.mu.Unlock()
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
		for _, h := range s.decider.Held() {
			if left[h.Fault.Node] {
				s.decider.Forget(h.Fault.Key())
			}
		}
	}
	set := s.set()
	for node, joined := range moves {
		if !joined {
			s.decider.Taints().Untainted(node) // its grants count in its new shard's budget
			s.moved.WithLabelValues("left").Inc()
			s.log.Info("node left the shard: its held faults go to its new shard", "node", node)
			continue
		}
		s.moved.WithLabelValues("joined").Inc()
		taken := 0
		for _, nf := range s.actor.HeldRecords(node) {
			if f, ok := nodefault.FaultOf(set, nf); ok {
				s.decider.Restore(heldOf(f, nf.Status))
				taken++
			}
		}
		s.log.Info("node joined the shard", "node", node, "held_faults_taken_over", taken)
	}
}

package decide

import "maps"

// Stats are the Decider's counters (monotonic, since New) and gauges (now), for
// metrics.
type Stats struct {
	// Decisions counts decisions by kind, those Release returned included.
	Decisions map[Kind]uint64
	// DryRuns counts dry-run decisions by the kind they would have been.
	DryRuns map[Kind]uint64
	// Holds counts hold decisions by reason (a fault held again counts again).
	Holds map[HoldReason]uint64
	// Held is the number of faults in the held queue now, by reason.
	Held map[HoldReason]int
	// HeldEvicted counts held faults pushed out of the full queue (by reason in
	// EvictedBy); HeldExpired those older than HeldTTL; HeldCleared those made moot
	// (the node got the taint, or a probe passed); HeldForgotten those Forget removed.
	HeldEvicted   uint64
	EvictedBy     map[HoldReason]uint64
	HeldExpired   uint64
	HeldCleared   uint64
	HeldForgotten uint64
	// Released counts held faults Release handed back.
	Released uint64
	// StormsStarted, StormsEnded, StormsReleased count storms; StormsActive is the
	// number of rules a storm holds now.
	StormsStarted  uint64
	StormsEnded    uint64
	StormsReleased uint64
	StormsActive   int
	// PendingTaints is the number of taints granted within PendingTTL (they count
	// against the budgets whether or not the facts show them yet).
	PendingTaints int
}

// Stats returns a snapshot of the counters. The budget left depends on the facts:
// see BudgetLeft.
func (d *Decider) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.storms.refresh(now)
	d.held.expire(now, d.cfg.HeldTTL, &d.st)
	s := Stats{
		Decisions:      maps.Clone(d.st.decisions),
		DryRuns:        maps.Clone(d.st.dryRuns),
		Holds:          maps.Clone(d.st.holds),
		Held:           map[HoldReason]int{},
		HeldEvicted:    d.st.heldEvicted,
		EvictedBy:      maps.Clone(d.st.evictedBy),
		HeldExpired:    d.st.heldExpired,
		HeldCleared:    d.st.heldCleared,
		HeldForgotten:  d.st.heldForgotten,
		Released:       d.st.released,
		StormsStarted:  d.st.stormsStarted,
		StormsEnded:    d.st.stormsEnded,
		StormsReleased: d.st.stormsReleased,
	}
	for _, e := range d.held.entries {
		s.Held[e.reason]++
	}
	for _, st := range d.storms.storms {
		if st.holding() {
			s.StormsActive++
		}
	}
	for _, g := range d.grants {
		s.PendingTaints += len(g)
	}
	return s
}

package decide

// counters are the Decider's monotonic counts; tests read them through Stats
// (export_test.go).
type counters struct {
	decisions      map[Kind]uint64
	dryRuns        map[Kind]uint64
	holds          map[HoldReason]uint64
	evictedBy      map[HoldReason]uint64
	heldEvicted    uint64
	heldExpired    uint64
	heldCleared    uint64
	heldForgotten  uint64
	released       uint64
	stormsStarted  uint64
	stormsEnded    uint64
	stormsReleased uint64
}

func newCounters() counters {
	return counters{
		decisions: map[Kind]uint64{},
		dryRuns:   map[Kind]uint64{},
		holds:     map[HoldReason]uint64{},
		evictedBy: map[HoldReason]uint64{},
	}
}

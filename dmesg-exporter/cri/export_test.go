package cri

// What only the tests read: the reassembler's counters and state.

// ReassemblerStats are a reassembler's running counters.
type ReassemblerStats = reassemblerCounts

// Stats returns the running counters.
func (r *Reassembler) Stats() ReassemblerStats { return r.stats }

// Pending reports whether an unfinished line is held for any stream.
func (r *Reassembler) Pending() bool { return r.streams[0].active || r.streams[1].active }

package cri

// ReassemblerStats are a reassembler's running counters.
type ReassemblerStats = reassemblerCounts

// Stats returns the running counters.
func (r *Reassembler) Stats() ReassemblerStats { return r.stats }

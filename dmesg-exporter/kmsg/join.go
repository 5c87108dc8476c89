package kmsg

import (
	"strings"
	"sync/atomic"
	"time"
)

// joiner merges continuation fragments into the record they continue.
//
// Since Linux 4.10 a fragment that could not be appended to the line it
// continues is stored as its own record flagged 'c'; it continues the
// record before it (when both carry a caller id, only if it is the same).
// Before 4.10, 'c' marked the first fragment of a line and '+' each
// following one. The two conventions disagree about 'c', so the joiner
// assumes the current one until it sees a '+', and from then on treats the
// stream as old-style; records it is still holding are regrouped.
//
// A current-style fragment joins only what it can continue: a record logged
// within gap of it by the kernel's clock (so that a ring buffer read in one go
// at start-up joins exactly what the same records read live would), and not a
// record that starts a line of its own (startsLine).
type joiner struct {
	legacy  bool
	gap     time.Duration // 0: any gap
	pending []Record      // one group, not yet delivered
	ready   []Record      // merged records to deliver, oldest first
	merged  *atomic.Uint64
}

func (j *joiner) hasPending() bool { return len(j.pending) > 0 }

func (j *joiner) push(r Record) {
	switch r.Flags {
	case FlagsFollows:
		if !j.legacy {
			j.legacy = true
			j.regroup()
		}
		if len(j.pending) == 0 {
			j.ready = append(j.ready, r) // a fragment without its start
			return
		}
		j.pending = append(j.pending, r)
	case FlagsCont:
		if j.legacy || len(j.pending) == 0 || !j.continues(&j.pending[len(j.pending)-1], &r) {
			j.flush()
		}
		j.pending = append(j.pending, r)
	default:
		j.flush()
		j.pending = append(j.pending, r)
	}
}

// continues reports whether the current-style fragment r continues prev.
func (j *joiner) continues(prev, r *Record) bool {
	return sameCaller(prev, r) && !startsLine(r) && (j.gap <= 0 || r.Monotonic-prev.Monotonic <= j.gap)
}

func sameCaller(a, b *Record) bool {
	return a.Caller == "" || b.Caller == "" || a.Caller == b.Caller
}

// startsLine reports a fragment that is a whole line of its own although flagged
// 'c': NVIDIA's driver prefixes every line it prints with KERN_CONT
// (nv_printf in kernel-open/nvidia/os-interface.c, every branch), so each NVRM
// line, Xids included, that follows a finished line is stored flagged 'c';
// its lines start with "NVRM: " and the driver's real continuations do not.
func startsLine(r *Record) bool {
	return strings.HasPrefix(r.Message, "NVRM: ")
}

// regroup splits the pending records at old-style group starts (every
// record not flagged '+'), delivering all but the last group.
func (j *joiner) regroup() {
	start := 0
	for i := 1; i < len(j.pending); i++ {
		if j.pending[i].Flags != FlagsFollows {
			j.ready = append(j.ready, j.merge(j.pending[start:i]))
			start = i
		}
	}
	if start > 0 {
		j.pending = append(j.pending[:0], j.pending[start:]...)
	}
}

// flush delivers the pending group.
func (j *joiner) flush() {
	if len(j.pending) > 0 {
		j.ready = append(j.ready, j.merge(j.pending))
		j.pending = j.pending[:0]
	}
}

func (j *joiner) merge(parts []Record) Record {
	head := parts[0]
	if len(parts) == 1 {
		return head
	}
	n := 0
	for i := range parts {
		n += len(parts[i].Message)
	}
	msg := make([]byte, 0, n)
	for i := range parts {
		msg = append(msg, parts[i].Message...)
		if i > 0 {
			head.Dict = append(head.Dict, parts[i].Dict...)
		}
	}
	head.Message = string(msg)
	head.LastSeq = parts[len(parts)-1].LastSeq
	if j.merged != nil {
		j.merged.Add(uint64(len(parts) - 1))
	}
	return head
}

func (j *joiner) pop() (Record, bool) {
	if len(j.ready) == 0 {
		return Record{}, false
	}
	r := j.ready[0]
	j.ready[0] = Record{}
	j.ready = j.ready[1:]
	if len(j.ready) == 0 {
		j.ready = nil
	}
	return r, true
}

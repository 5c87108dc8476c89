package kmsg

// What only the tests read: the reader's counters and helpers over records.

import (
	"strings"
	"time"
)

// Stats are a reader's running counters.
type Stats struct {
	Records     uint64 // records delivered by Next
	Malformed   uint64 // inputs rejected by Parse or over MaxRecordSize
	Lost        uint64 // records missing from sequence gaps (incl. overruns)
	Gaps        uint64 // number of gaps
	Overruns    uint64 // EPIPE returns from the device
	Regressions uint64 // records whose seq was not above the previous one
	Skipped     uint64 // records skipped because of SeekAfter
	Merged      uint64 // continuation fragments folded into another record
}

// Stats returns a snapshot of the reader's counters.
func (r *Reader) Stats() Stats {
	return Stats{
		Records:     r.stats.records.Load(),
		Malformed:   r.stats.malformed.Load(),
		Lost:        r.stats.lost.Load(),
		Gaps:        r.stats.gaps.Load(),
		Overruns:    r.stats.overruns.Load(),
		Regressions: r.stats.regressions.Load(),
		Skipped:     r.stats.skipped.Load(),
		Merged:      r.stats.merged.Load(),
	}
}

// Unescape decodes \xHH escapes (either case of hex digits). A backslash
// that does not start a complete escape is kept as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return string(appendUnescaped(make([]byte, 0, len(s)), []byte(s)))
}

// IsContinuation reports whether the record is a fragment of a continuation
// line (flags 'c' or '+').
func (r *Record) IsContinuation() bool {
	return r.Flags == FlagsCont || r.Flags == FlagsFollows
}

// WallTime converts the record's printk timestamp to wall-clock time given
// the boot time (see BootTime).
func (r *Record) WallTime(boot time.Time) time.Time { return boot.Add(r.Monotonic) }

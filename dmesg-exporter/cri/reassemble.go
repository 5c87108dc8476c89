package cri

import (
	"time"
	"unicode/utf8"
)

// DefaultMaxLineSize is the default cap on a reassembled line, Loki's
// default limit on the size of a log line.
const DefaultMaxLineSize = 256 << 10

// TruncationMark ends the message of a line cut at the size cap.
const TruncationMark = " [truncated]"

// Truncate marks msg as cut: it ends it with TruncationMark, keeping at most
// limit bytes in all and cutting at a rune boundary.
func Truncate(msg string, limit int) string {
	keep := max(0, min(len(msg), limit-len(TruncationMark)))
	for keep > 0 && keep < len(msg) && !utf8.RuneStart(msg[keep]) {
		keep--
	}
	return msg[:keep] + TruncationMark
}

// Line is a whole log line, joined from one or more entries.
type Line struct {
	// Time is the timestamp of the line's first entry.
	Time time.Time
	// Stream the line was written to.
	Stream Stream
	// Message is the joined text. It is at most the reassembler's maximum
	// size long, TruncationMark included.
	Message string
	// Entries is the number of CRI lines that went into Message; for a
	// truncated line, those up to the cut.
	Entries int
	// Truncated is true when the line was cut at the size cap; Message
	// then ends with TruncationMark and the rest of the line is dropped.
	Truncated bool
	// Incomplete is true for a line returned by Flush: its final ("F")
	// entry never came.
	Incomplete bool
}

// reassemblerCounts are a reassembler's running counters (read by its tests).
type reassemblerCounts struct {
	Lines        uint64 // lines returned by Add and Flush
	Partials     uint64 // partial ("P") entries seen
	Truncated    uint64 // lines cut at the size cap
	DroppedBytes uint64 // message bytes dropped by truncation
}

// Reassembler joins partial ("P") entries with the entries that follow them
// on the same stream, up to and including the next full ("F") entry. The
// two streams are joined independently. A line that grows past the size cap
// is returned at once, cut and marked with TruncationMark; the rest of it is
// dropped up to its "F" entry, so memory stays bounded by about twice the
// cap. Use one Reassembler per log file. It is not safe for concurrent use.
type Reassembler struct {
	max     int
	streams [2]pending
	stats   reassemblerCounts
}

type pending struct {
	buf        []byte
	time       time.Time
	entries    int
	active     bool // an unfinished line is held
	discarding bool // the held line was already returned truncated
}

// NewReassembler returns a reassembler that caps lines at maxSize bytes
// (DefaultMaxLineSize when maxSize <= 0). The cap is raised to hold at least
// TruncationMark and one more byte.
func NewReassembler(maxSize int) *Reassembler {
	if maxSize <= 0 {
		maxSize = DefaultMaxLineSize
	}
	maxSize = max(maxSize, len(TruncationMark)+1)
	return &Reassembler{max: maxSize}
}

// MaxSize returns the cap on a line's message in bytes.
func (r *Reassembler) MaxSize() int { return r.max }

func streamIndex(s Stream) int {
	if s == Stderr {
		return 1
	}
	return 0
}

// Add takes the next entry of a file and returns a line when one is
// complete: on an "F" entry, or when a line reaches the size cap. An "F"
// entry that ends a line already returned truncated returns nothing.
func (r *Reassembler) Add(e Entry) (Line, bool) {
	p := &r.streams[streamIndex(e.Stream)]
	if !p.active {
		if !e.Partial && len(e.Message) <= r.max {
			// The common case: a whole line in one entry.
			r.stats.Lines++
			return Line{Time: e.Time, Stream: e.Stream, Message: e.Message, Entries: 1}, true
		}
		p.active, p.time, p.entries, p.buf = true, e.Time, 0, p.buf[:0]
	}
	p.entries++
	if e.Partial {
		r.stats.Partials++
	}
	if p.discarding {
		r.stats.DroppedBytes += uint64(len(e.Message))
		if !e.Partial {
			p.reset()
		}
		return Line{}, false
	}
	if len(p.buf)+len(e.Message) > r.max {
		// Cut, mark, return now, and drop the rest of this line.
		keep := cutPoint(p.buf, e.Message, r.max-len(TruncationMark))
		dropped := len(p.buf) + len(e.Message) - keep
		if keep > len(p.buf) {
			p.buf = append(p.buf, e.Message[:keep-len(p.buf)]...)
		} else {
			p.buf = p.buf[:keep]
		}
		p.buf = append(p.buf, TruncationMark...)
		r.stats.Truncated++
		r.stats.DroppedBytes += uint64(dropped)
		r.stats.Lines++
		l := Line{Time: p.time, Stream: e.Stream, Message: string(p.buf), Entries: p.entries, Truncated: true}
		if e.Partial {
			p.discarding = true
			p.buf = p.buf[:0]
		} else {
			p.reset()
		}
		return l, true
	}
	p.buf = append(p.buf, e.Message...)
	if e.Partial {
		return Line{}, false
	}
	r.stats.Lines++
	l := Line{Time: p.time, Stream: e.Stream, Message: string(p.buf), Entries: p.entries}
	p.reset()
	return l, true
}

func (p *pending) reset() {
	p.active, p.discarding, p.entries, p.time = false, false, 0, time.Time{}
	if cap(p.buf) > 64<<10 {
		p.buf = nil // do not pin a large buffer
	} else {
		p.buf = p.buf[:0]
	}
}

// cutPoint returns how many bytes of buf+msg to keep so that the result is
// at most limit bytes and does not end inside a UTF-8 sequence.
func cutPoint(buf []byte, msg string, limit int) int {
	n := min(limit, len(buf)+len(msg))
	at := func(i int) byte {
		if i < len(buf) {
			return buf[i]
		}
		return msg[i-len(buf)]
	}
	if n == len(buf)+len(msg) {
		return n
	}
	// Step back over at most 3 continuation bytes to a rune start, and
	// drop that start too if its sequence would be cut.
	for back := 0; back < utf8.UTFMax && n-back >= 0; back++ {
		c := at(n - back)
		if utf8.RuneStart(c) {
			return n - back
		}
	}
	return n
}

// Flush returns the unfinished lines held for either stream (stdout first)
// with Incomplete set, and forgets them. Call it when a file ends for good,
// e.g. after rotation or when the container is gone.
func (r *Reassembler) Flush() []Line {
	var out []Line
	for i := range r.streams {
		p := &r.streams[i]
		if !p.active {
			continue
		}
		if !p.discarding {
			s := Stdout
			if i == 1 {
				s = Stderr
			}
			out = append(out, Line{Time: p.time, Stream: s, Message: string(p.buf), Entries: p.entries, Incomplete: true})
			r.stats.Lines++
		}
		p.reset()
	}
	return out
}

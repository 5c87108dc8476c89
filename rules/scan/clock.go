package scan

import (
	"time"

	"github.com/faultline-dev/faultline/rules/correlate"
	"github.com/faultline-dev/faultline/rules/logline"
)

// stream is one node's lines in one input, and its clock: the time of its latest
// line, which lines without a time of their own share.
type stream struct {
	key     streamKey
	node    string // as reported
	corrKey correlate.Key
	lines   int64

	clock logline.Clock // of the latest timed line; ClockNone before one
	wall  time.Time     // ClockWall: the time; ClockWallNoYear: the time in year 0
	// yearShift counts the new years seen in dates without a year.
	yearShift int
	// Seconds since boot: uptime of the latest line, and where the current boot
	// starts on the stream's timeline.
	uptime   time.Duration
	bootBase time.Time
	booted   bool
}

// epoch is where streams without calendar times start.
var epoch = time.Unix(0, 0).UTC()

// observe takes a line's own time into the stream's clock. It does the cheap part
// only; now builds the time when a line needs it.
func (st *stream) observe(p *logline.Parsed, rebootGap time.Duration) {
	st.lines++
	switch p.Clock {
	case logline.ClockNone:
		return
	case logline.ClockWall:
		st.wall = p.Time
	case logline.ClockWallNoYear:
		// Year-less dates run back by months only at a new year. Most lines share
		// their second with the line before: the same time, compared in a few words.
		if st.clock == logline.ClockWallNoYear && p.Time != st.wall && p.Time.Before(st.wall.Add(-183*24*time.Hour)) {
			st.yearShift++
		}
		st.wall = p.Time
	case logline.ClockBoot:
		if !st.booted {
			st.booted, st.bootBase = true, epoch
		} else if p.Uptime+time.Second < st.uptime {
			// Seconds since boot ran back: the node rebooted.
			st.bootBase = st.bootBase.Add(st.uptime + rebootGap)
		}
		st.uptime = p.Uptime
	}
	st.clock = p.Clock
}

// now is the time of the stream's latest line: its own, the last one before it, or,
// in a stream that never had one, one second per line.
func (st *stream) now(year int) time.Time {
	switch st.clock {
	case logline.ClockWall:
		return st.wall
	case logline.ClockWallNoYear:
		w := st.wall
		return time.Date(year+st.yearShift, w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC)
	case logline.ClockBoot:
		return st.bootBase.Add(st.uptime)
	}
	return epoch.Add(time.Duration(st.lines) * time.Second)
}

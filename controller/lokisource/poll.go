package lokisource

import "time"

// While tailing, a query is also read with query_range (the poll), because Loki's
// tail can stop delivering a busy stream without reporting dropped entries. Under
// load most of what a poll reads the tail already delivered (2,000 lines/s re-read
// for every second the poll covers), so the poll reads each stretch once, from
// where the previous poll started less lateMargin, and runs less often while it
// finds nothing new.
const (
	// lateMargin: a poll re-reads this much before where the previous one started,
	// for lines that reach Loki late (an exporter's or collector's batching); lines
	// later than that are still delivered by the tail, or read after a reconnect
	// (Overlap).
	lateMargin = 5 * time.Second
	// tailSlack (plus DelayFor): how long the tail may take to deliver a line
	// that reached Loki; a poll that finds only lines newer than that found
	// nothing the tail missed.
	tailSlack = 3 * time.Second
	// maxPollFactor bounds the interval to this many PollIntervals.
	maxPollFactor = 8
)

// poller is the schedule of one tail's polls.
type poller struct {
	base, interval time.Duration
	pageLimit      int
	from           int64 // Unix ns: where the previous poll started (wall clock)
}

func newPoller(base time.Duration, pageLimit int, start time.Time) *poller {
	return &poller{base: base, interval: base, pageLimit: pageLimit, from: start.UnixNano()}
}

// done records a poll that started at started, emitted missed lines the tail
// should have delivered already and re-read dups lines the tail had delivered, and sets the next interval: twice
// as long (up to maxPollFactor times the base) when it found nothing new but
// re-read at least a page, the base otherwise. True when the interval changed.
//
// A poll covers every line present in Loki when it ran, from where the previous
// poll started less lateMargin; so any line reaching Loki at most lateMargin after
// its timestamp is read by the first poll after it arrived, whatever the interval.
func (p *poller) done(started time.Time, missed, dups int64) bool {
	p.from = started.UnixNano()
	next := p.base
	if missed == 0 && dups >= int64(p.pageLimit) {
		next = min(2*p.interval, maxPollFactor*p.base)
	}
	changed := next != p.interval
	p.interval = next
	return changed
}

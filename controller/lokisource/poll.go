package lokisource

import "time"

// While tailing, a query is also read with query_range (the poll), because Loki's
// tail can stop delivering a busy stream without reporting dropped entries: an
// ingester holds at most 5 streams per tail waiting to be sent, drops the streams
// of a push that overflows it (a collector's push carries many nodes' streams),
// and ends a tail dropping for 15 s, which the querier silently opens again. Under
// load most of what a poll reads the tail already delivered (2,000 lines/s re-read
// for every second the poll covers), so the poll reads each stretch once, from
// where the previous poll started less lateMargin, and runs less often after
// several polls in a row found nothing new.
const (
	// lateMargin: a poll re-reads this much before where the previous one started,
	// for lines that reach Loki late (an exporter's or collector's batching); lines
	// later than that are still delivered by the tail, or read after a reconnect
	// (Overlap).
	lateMargin = 5 * time.Second
	// tailSlack (plus DelayFor): how long the tail may take to deliver a line that
	// reached Loki (Loki's querier sends what it holds, then sleeps 500 ms); a poll
	// that emits only lines newer than that found nothing the tail missed.
	tailSlack = time.Second
	// maxPollFactor bounds the interval to this many PollIntervals.
	maxPollFactor = 8
	// slowAfter polls in a row that found nothing the tail had not delivered
	// double the interval: a tail that drops now and then (a line it missed waits
	// for the next poll) keeps the poll at its base.
	slowAfter = 4
)

// poller is the schedule of one tail's polls.
type poller struct {
	base, interval time.Duration
	pageLimit      int
	from           int64 // Unix ns: where the previous poll started (wall clock)
	clean          int   // polls in a row that found nothing the tail had not delivered
}

func newPoller(base time.Duration, pageLimit int, start time.Time) *poller {
	return &poller{base: base, interval: base, pageLimit: pageLimit, from: start.UnixNano()}
}

// done records a poll that started at started, emitted missed lines the tail
// should have delivered already and re-read dups lines the tail (or an earlier
// poll) had delivered, and
// sets the next interval: twice as long (up to maxPollFactor times the base) after
// slowAfter polls in a row that found nothing new but re-read at least a page, the
// base after one that found a line the tail missed or read less than a page. True
// when the interval changed.
//
// A poll covers every line present in Loki when it ran, from where the previous
// poll started less lateMargin; so any line reaching Loki at most lateMargin after
// its timestamp is read by the first poll after it arrived, whatever the interval.
func (p *poller) done(started time.Time, missed, dups int64) bool {
	p.from = started.UnixNano()
	next := p.base
	if missed == 0 && dups >= int64(p.pageLimit) {
		p.clean++
		next = p.interval
		if p.clean >= slowAfter {
			next, p.clean = min(2*p.interval, maxPollFactor*p.base), 0
		}
	} else {
		p.clean = 0
	}
	changed := next != p.interval
	p.interval = next
	return changed
}

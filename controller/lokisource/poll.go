package lokisource

import (
	"context"
	"log/slog"
	"time"

	"github.com/faultline-dev/faultline/logstream"
)

// While tailing, a query is also read with query_range (the poll), because Loki's
// tail drops lines without reporting them: an ingester holds at most 5 groups of
// lines per tail waiting to be sent (a group per stream and set of structured
// metadata, so a collector's push of many nodes' lines makes many), drops the rest,
// and ends a tail dropping for 15 s, which the querier silently opens again. So
// under load the poll, not the tail, reads most lines, and how soon it runs is the
// reading's latency: while the tail drops lines the poll runs again after fastPoll
// (or half its own duration, whichever is longer, so that polls take at most two
// thirds of the time).
//
// A poll reads on from where the previous one started, less its interval (at least
// fastMargin) for lines still on their way into Loki. Lines that reach Loki later
// than that are found by the audit, which runs beside the polls: once a second of lines is lateMargin old,
// Loki counts the query's lines in it (a metric query: Loki sends a count, not the
// lines), and the second is read again only if Loki holds more lines than were
// read. So each line is read at most about twice and counted once, however often
// the poll runs.
const (
	// fastPoll: the shortest interval, while the tail drops lines.
	fastPoll = 150 * time.Millisecond
	// fastMargin: a poll re-reads at least this much before where the previous one
	// started (see poller.margin).
	fastMargin = 250 * time.Millisecond
	// auditStep, lateMargin: see above. Lines later than lateMargin are still
	// delivered by the tail, or read after a reconnect (Overlap).
	auditStep  = time.Second
	lateMargin = 5 * time.Second
	// maxAuditSteps bounds one audit (after audits held up for minutes).
	maxAuditSteps = 300
	// tailSlack (plus DelayFor): how long the tail may take to deliver a line that
	// reached Loki (Loki's querier sends what it holds, then sleeps 500 ms); a line
	// a poll finds older than that, or one a poll read first that the tail does not
	// deliver within it, is one the tail missed.
	tailSlack = time.Second
	// slowAfter polls in a row that found the tail delivering everything double
	// the interval.
	slowAfter = 4
)

// poller is the schedule of one tail's polls.
type poller struct {
	base, interval time.Duration
	steady         func() bool   // true: keep base (Config.Backstop)
	slack          time.Duration // how long the tail may take to deliver a line
	from           int64         // Unix ns: where the previous poll started (wall clock)
	clean          int           // polls in a row that found the tail delivering everything
	owed           []owed        // lines polls read first, not delivered by the tail yet
}

// owed: n lines a poll that started at (Unix ns) read before the tail delivered them.
type owed struct{ at, n int64 }

// pollResult is what one poll found.
type pollResult struct {
	polled    int64 // lines it emitted: the tail had not delivered them (yet)
	missed    int64 // of those, lines older than the tail's slack: the tail missed them
	delivered int64 // lines the tail delivered since the previous poll that a poll had emitted
}

func newPoller(base, slack time.Duration, start time.Time) *poller {
	return &poller{base: base, interval: base, slack: slack, from: start.UnixNano()}
}

// margin is how much before where the previous poll started the next one reads:
// as long as the interval, at least fastMargin, at most lateMargin. So a line that
// reaches Loki up to an interval late is read by the next poll, not seconds later by
// the audit (and after lines newer than it, which a rule that counts a sequence
// would miss); and polls read each line at most about twice, however short the
// interval.
func (p *poller) margin() time.Duration {
	return max(fastMargin, min(p.interval, lateMargin))
}

// dropped settles what the tail owes after a poll that started at started: the
// lines it delivered after polls had read them pay off the oldest debts first. It
// returns how many lines the tail is known to have dropped: those the poll found
// older than the slack, and those polls read first that the tail did not deliver
// within the slack.
func (p *poller) dropped(started time.Time, r pollResult) int64 {
	dropped := r.missed
	paid := r.delivered
	due := started.Add(-p.slack).UnixNano()
	keep := p.owed[:0]
	for _, o := range p.owed {
		pay := min(paid, o.n)
		paid -= pay
		o.n -= pay
		switch {
		case o.n == 0:
		case o.at < due:
			dropped += o.n
		default:
			keep = append(keep, o)
		}
	}
	p.owed = keep
	// The lines found older than the slack are known dropped already.
	if young := r.polled - r.missed; young > 0 && len(p.owed) < maxOwed {
		p.owed = append(p.owed, owed{at: started.UnixNano(), n: young})
	}
	return dropped
}

// maxOwed bounds the polls whose lines wait for the tail (more than the slack holds
// at the shortest interval).
const maxOwed = 64

// done records a poll that started at started and took took, and sets the next
// interval: while the tail drops lines (see dropped), fastPoll or half as long as
// the poll took, whichever is longer (polls, not the tail, read the lines now); after
// slowAfter polls in a row that found the tail delivering everything, twice as
// long, up to PollInterval; while steady says another path delivers the lines,
// the interval stays PollInterval. (Polls read each line about once at any interval, so a
// longer one would save Loki little.) It returns whether the interval changed and
// how many lines the tail is known to have dropped.
//
// Any line that reaches Loki at most fastMargin after its timestamp is read by the
// first poll after it arrived, and at most lateMargin after it by the first audit.
func (p *poller) done(started time.Time, took time.Duration, r pollResult) (changed bool, dropped int64) {
	p.from = started.UnixNano()
	next := p.interval
	if dropped = p.dropped(started, r); dropped > 0 && p.steady != nil && p.steady() {
		p.clean, next = 0, p.base
	} else if dropped > 0 {
		p.clean = 0
		next = max(fastPoll, took/2)
	} else if p.clean++; p.clean >= slowAfter {
		p.clean = 0
		next = min(2*next, p.base)
	}
	changed = next != p.interval
	p.interval = next
	return changed, dropped
}

// poll reads q from where p says, and audits what was read when an audit is due;
// it sets p's next interval.
func (s *Source) poll(ctx context.Context, log *slog.Logger, q Query, st *queryState, p *poller, emit func(logstream.Line) error) error {
	started := time.Now()
	st.mu.Lock()
	from := max(st.win.floor, min(st.win.maxTs, p.from)-int64(min(s.cfg.Overlap, p.margin())))
	before := st.counts // since the previous poll: the tail's
	st.counts = readCounts{}
	// A newer line the tail may still be about to deliver.
	st.missedBefore = started.Add(-p.slack).UnixNano()
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		st.missedBefore = 0
		st.mu.Unlock()
	}()
	if err := s.catchUp(ctx, log, q, st, from, emit); err != nil {
		return err
	}
	took := time.Since(started)
	st.mu.Lock()
	c := st.counts
	st.counts = readCounts{}
	st.mu.Unlock()
	r := pollResult{polled: c.polled, missed: c.missed, delivered: before.redelivered}
	changed, dropped := p.done(started, took, r)
	if dropped > 0 {
		s.m.MissedByTail(q.Name, int(dropped))
	}
	if changed {
		s.m.PollInterval(q.Name, p.interval)
		log.Debug("poll interval changed", "interval", p.interval, "read_first", c.polled, "missed_by_tail", dropped, "read_again", c.dups)
	}
	return nil
}

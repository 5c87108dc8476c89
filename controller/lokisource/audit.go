package lokisource

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/faultline-dev/faultline/logstream"
)

// auditor is the schedule of one tail's audits.
type auditor struct {
	audited int64        // Unix ns: where the audited steps end
	polled  atomic.Int64 // Unix ns: where the last poll (or the catch-up) started
	warned  bool         // that Loki does not count
}

// newAuditor audits the steps from lateMargin before start on: lines that reach
// Loki late after the catch-up, which ran until start, that preceded the tail.
func newAuditor(start time.Time) *auditor {
	step := int64(auditStep)
	a := &auditor{audited: (start.UnixNano()-int64(lateMargin))/step*step - step}
	a.polled.Store(start.UnixNano())
	return a
}

// due says which steps an audit at now counts: those not audited yet that ended
// lateMargin ago or earlier, and before the last poll started (what a poll is
// about to read is not audited), in whole steps. So each step is counted once,
// once every line that reaches Loki at most lateMargin late is in it.
func (a *auditor) due(now time.Time) (start int64, n int, ok bool) {
	step := int64(auditStep)
	end := min(now.UnixNano()-int64(lateMargin), a.polled.Load()) / step * step
	start = max(a.audited, end-maxAuditSteps*step)
	return start, int((end - start) / step), end > start
}

// done records an audit of the steps up to end.
func (a *auditor) done(end int64) { a.audited = end }

// auditLoop audits q every auditStep, beside the tail and the polls, until ctx ends
// (nil) or an audit fails.
func (s *Source) auditLoop(ctx context.Context, log *slog.Logger, q Query, st *queryState, a *auditor, emit func(logstream.Line) error) error {
	tick := time.NewTicker(auditStep)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			start, n, ok := a.due(now)
			if !ok {
				continue
			}
			if start > a.audited {
				log.Warn("audit held up; seconds of lines left unaudited", "from", unixTime(a.audited), "to", unixTime(start))
			}
			if err := s.audit(ctx, log, q, st, a, start, n, emit); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			a.done(start + int64(n)*int64(auditStep))
		}
	}
}

// audit has Loki count q's lines in n auditSteps from start and reads again the
// steps where it holds more than were read; where Loki does not count (a proxy
// that refuses metric queries), it reads them all again.
func (s *Source) audit(ctx context.Context, log *slog.Logger, q Query, st *queryState, a *auditor, start int64, n int, emit func(logstream.Line) error) error {
	step := int64(auditStep)
	st.mu.Lock()
	floor := st.win.floor
	st.mu.Unlock()
	if start < floor {
		// The window no longer knows what was read before its floor.
		skip := int((floor-start)/step) + 1
		start, n = start+int64(skip)*step, n-skip
		if n <= 0 {
			return nil
		}
	}
	theirs, err := s.countBuckets(ctx, q.LogQL, start, auditStep, n)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		level := slog.LevelDebug
		if !a.warned {
			level, a.warned = slog.LevelWarn, true
		}
		log.Log(ctx, level, "audit: Loki did not count the lines; reading them again (said once per tail)", "from", unixTime(start), "seconds", n, "err", err)
		s.m.AuditReads(q.Name, n)
		return s.readRange(ctx, log, q, st, start+1, start+int64(n)*step+1, emit)
	}
	st.mu.Lock()
	ours := st.win.countBuckets(start, auditStep, n)
	st.mu.Unlock()
	for i := range n {
		if theirs[i] <= ours[i] {
			continue
		}
		lo := start + int64(i)*step
		log.Debug("audit: Loki holds lines not read; reading them", "from", unixTime(lo), "loki", theirs[i], "read", ours[i])
		s.m.AuditReads(q.Name, 1)
		// The step is (lo, lo+auditStep]; readRange's range is [from, end).
		if err := s.readRange(ctx, log, q, st, lo+1, lo+step+1, emit); err != nil {
			return err
		}
	}
	return nil
}

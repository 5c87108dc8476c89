package lokisource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/logstream"
)

// Range is a stretch of history for Source.History.
type Range struct {
	// From (inclusive) and To (exclusive) bound the lines' timestamps.
	From, To time.Time
	// Step is the stretch read for every query before its lines are merged and
	// emitted; default 1h. A shorter step holds fewer lines at once.
	Step time.Duration
	// MaxLines bounds the lines one step may hold (all queries together); more is
	// an error that names the step, not a silent cut. Default 1,000,000.
	MaxLines int
	// Progress, when set, is called after each step with the end of the stretch
	// emitted so far.
	Progress func(done time.Time)
}

// ErrTooManyLines is matched (errors.Is) by the error History returns when one step
// holds more than Range.MaxLines lines.
var ErrTooManyLines = errors.New("too many lines in one step")

// History emits the queries' lines of r, oldest first across all queries, through
// the catch-up path of Run (query_range pages in windows under Loki's
// max_query_length, deduplicated, dated as Run dates them) and without the tail. It
// reads one Step at a time: every query's lines of the step, merged by time (lines
// of equal time keep the queries' order), then the next step. It fails on the first
// error of Loki, including a query Loki refuses, and on a step over MaxLines. It may
// not run while Run is active.
func (s *Source) History(ctx context.Context, r Range, emit func(logstream.Line) error) error {
	if !r.From.Before(r.To) {
		return fmt.Errorf("lokisource: history from %s to %s is empty", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	}
	if r.Step <= 0 {
		r.Step = time.Hour
	}
	if r.MaxLines <= 0 {
		r.MaxLines = 1_000_000
	}
	qs, err := s.idleQueries("History")
	if err != nil {
		return err
	}
	states := make([]*queryState, len(qs))
	for i := range qs {
		states[i] = &queryState{win: newWindow(r.From.UnixNano(), s.cfg.DedupeWindow, s.cfg.MaxDedupeKeys)}
	}
	var buf []logstream.Line
	for start := r.From; start.Before(r.To); start = start.Add(r.Step) {
		end := min(start.Add(r.Step).UnixNano(), r.To.UnixNano())
		buf = buf[:0]
		collect := func(l logstream.Line) error {
			if len(buf) >= r.MaxLines {
				return fmt.Errorf("%w: more than %d lines between %s and %s; use a shorter step",
					ErrTooManyLines, r.MaxLines, start.Format(time.RFC3339), time.Unix(0, end).Format(time.RFC3339))
			}
			buf = append(buf, l)
			return nil
		}
		for i, q := range qs {
			if err := s.readStretch(ctx, s.log.With("query", q.Name), q, states[i], start.UnixNano(), end, collect); err != nil {
				return err
			}
		}
		if err := emitByTime(buf, emit); err != nil {
			return err
		}
		if r.Progress != nil {
			r.Progress(time.Unix(0, end))
		}
	}
	return nil
}

// readStretch is readRange for History and Warm: the lines of [from, end) of one
// query go to collect; an error names the query (collect's own error as it is).
func (s *Source) readStretch(ctx context.Context, log *slog.Logger, q Query, st *queryState, from, end int64, collect func(logstream.Line) error) error {
	if err := s.readRange(ctx, log, q, st, from, end, collect); err != nil {
		var ee *emitError
		if errors.As(err, &ee) {
			err = ee.err
		}
		return fmt.Errorf("lokisource: query %s: %w", q.Name, err)
	}
	return nil
}

// emitByTime emits buf's lines oldest first (lines of equal time keep their order).
func emitByTime(buf []logstream.Line, emit func(logstream.Line) error) error {
	slices.SortStableFunc(buf, func(a, b logstream.Line) int { return a.Time.Compare(b.Time) })
	for _, l := range buf {
		if err := emit(l); err != nil {
			return err
		}
	}
	return nil
}

// idleQueries returns the queries for a read beside Run (op: History, Warm), which
// may not run while Run is active.
func (s *Source) idleQueries(op string) ([]Query, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run != nil {
		return nil, fmt.Errorf("lokisource: %s while Run is active", op)
	}
	return slices.Clone(s.queries), nil
}

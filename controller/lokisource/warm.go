package lokisource

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/logstream"
)

// Warm emits, oldest first across the queries, the lines that a Run resumed from cp
// will not emit again but that the rules' windows still need: for each query, the
// lines of the horizon before its position, and those at or after the position's
// Since that it lists as emitted. A new leader feeds them to its correlator alone
// (the previous term decided them), so a threshold window or a multi-line group
// that spans the fail-over is whole. More than maxLines lines is ErrTooManyLines.
// It may not run while Run is active.
func (s *Source) Warm(ctx context.Context, cp Checkpoint, horizon time.Duration, maxLines int, emit func(logstream.Line) error) error {
	qs, err := s.idleQueries("Warm")
	if err != nil {
		return err
	}
	var buf []logstream.Line
	collect := func(l logstream.Line) error {
		if len(buf) >= maxLines {
			return fmt.Errorf("%w: more than %d lines in the %s before the read position", ErrTooManyLines, maxLines, horizon)
		}
		buf = append(buf, l)
		return nil
	}
	for _, q := range qs {
		since, upTo := cp.Start, cp.Start
		emitted := map[key]bool{}
		if p, ok := cp.Queries[q.Name]; ok {
			since, upTo = p.Since, p.Time
			for _, ks := range p.Keys {
				k, err := parseKey(ks)
				if err != nil {
					return fmt.Errorf("lokisource: query %s: checkpoint: %w", q.Name, err)
				}
				emitted[k] = true
			}
		}
		if since.IsZero() {
			continue // a query that starts "now" read nothing before
		}
		from, sinceNs := since.Add(-horizon).UnixNano(), since.UnixNano()
		st := &queryState{win: newWindow(from, s.cfg.DedupeWindow, s.cfg.MaxDedupeKeys),
			keep: func(k key, ts int64) bool { return ts < sinceNs || emitted[k] }}
		if err := s.readStretch(ctx, s.log.With("query", q.Name, "read", "warm"), q, st, from, upTo.UnixNano()+1, collect); err != nil {
			return err
		}
	}
	return emitByTime(buf, emit)
}

package lokisource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/faultline-dev/faultline/logstream"
)

// emitError carries an error of the caller's emit: it ends Run.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

// session outcomes.
type outcome struct {
	err      error
	dropped  bool
	dropFrom int64         // oldest timestamp Loki reported dropped
	ready    time.Duration // how long the tail was up
}

const (
	noDrop = int64(math.MaxInt64)
	// A tail up this long resets the backoff when it ends.
	healthyTail = 10 * time.Second
	// How long to wait for the tail's first ping or message before the second
	// catch-up anyway.
	tailReadyTimeout = 3 * time.Second
)

// follow runs catch-up and tail cycles for one query until ctx ends or a fatal error.
func (s *Source) follow(ctx context.Context, log *slog.Logger, q Query, st *queryState, emit func(logstream.Line) error) error {
	bo := s.cfg.Backoff.steps()
	dropFrom := noDrop
	for ctx.Err() == nil {
		st.mu.Lock()
		from := st.win.resumeFrom(s.cfg.Overlap)
		if dropFrom < from {
			from = max(dropFrom, st.win.floor)
		}
		st.mu.Unlock()
		dropFrom = noDrop

		o := s.session(ctx, log, q, st, from, emit)
		if ctx.Err() != nil {
			return nil
		}
		var ee *emitError
		if errors.As(o.err, &ee) {
			return ee.err
		}
		if isPermanent(o.err) {
			return &refusedError{err: o.err}
		}
		if o.ready >= healthyTail || o.dropped {
			bo = s.cfg.Backoff.steps()
		}
		var reason string
		var wait time.Duration
		switch {
		case o.dropped:
			reason = "dropped"
			dropFrom = o.dropFrom
		case errors.Is(o.err, websocket.ErrReadLimit):
			// The message was not read, so the position is before its lines: the
			// next catch-up reads them in pages that fit.
			reason = "read_limit"
			s.m.ReadLimit(q.Name, "tail")
			log.Warn("a tail message exceeds the size limit; catching up with query_range", "limit_bytes", s.cfg.MaxResponseBytes)
		case isClose(o.err):
			reason = "closed"
			wait = bo.Step()
			log.Info("tail ended by Loki; reconnecting", "err", o.err, "up", o.ready.Round(time.Millisecond), "retry_in", wait.Round(time.Millisecond))
		default:
			reason = "error"
			wait = bo.Step()
			log.Warn("Loki unreachable or failing; retrying", "err", o.err, "retry_in", wait.Round(time.Millisecond))
		}
		s.m.Reconnect(q.Name, reason)
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
	return nil
}

func isClose(err error) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce)
}

// session is one catch-up, tail, catch-up, stream cycle.
func (s *Source) session(ctx context.Context, log *slog.Logger, q Query, st *queryState, from int64, emit func(logstream.Line) error) outcome {
	st.mu.Lock()
	known := st.good == q.LogQL
	st.mu.Unlock()
	if !known {
		if err := s.checkQuery(ctx, q.LogQL); err != nil {
			return outcome{err: err}
		}
	}
	if err := s.catchUp(ctx, log, q, st, from, emit); err != nil {
		return outcome{err: err}
	}
	s.accepted(q, st)
	st.mu.Lock()
	// The tail replays from its start; the catch-up below covers everything older
	// than the last Overlap, and a start further back could exceed Loki's
	// max_query_length (an idle query's newest line can be days old).
	tailStart := max(st.win.maxTs, time.Now().Add(-s.cfg.Overlap).UnixNano())
	again := st.win.resumeFrom(s.cfg.Overlap)
	st.mu.Unlock()

	h, err := s.header()
	if err != nil {
		return outcome{err: err}
	}
	tailLimit := s.cfg.PageLimit
	if c := int(s.pageCap.Load()); c > 0 {
		tailLimit = min(tailLimit, c)
	}
	conn, resp, err := s.dialer.DialContext(ctx, s.tailURL(q.LogQL, tailStart, tailLimit), h)
	if err != nil {
		if resp != nil {
			body := make([]byte, 1024)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			return outcome{err: &statusError{op: "tail", code: resp.StatusCode, status: resp.Status, body: string(body[:n])}}
		}
		return outcome{err: fmt.Errorf("loki tail: %w", err)}
	}
	t := newTailReader(conn, s.cfg.TailIdleTimeout, s.cfg.MaxResponseBytes)
	defer t.close()
	stop := context.AfterFunc(ctx, t.close)
	defer stop()

	select {
	case <-t.ready:
	case <-t.done:
	case <-ctx.Done():
		return outcome{}
	case <-time.After(tailReadyTimeout):
		log.Debug("tail sent nothing yet; catching up anyway")
	}
	if err := s.catchUp(ctx, log, q, st, again, emit); err != nil {
		return outcome{err: err}
	}
	up := time.Now()
	log.Debug("tailing", "start", unixTime(tailStart))
	p := newPoller(s.cfg.PollInterval, s.cfg.DelayFor+tailSlack, up)
	p.steady = s.cfg.Backstop
	s.m.PollInterval(q.Name, p.interval)
	timer := time.NewTimer(p.interval)
	defer timer.Stop()
	actx, stopAudit := context.WithCancel(ctx)
	audited := make(chan error, 1)
	a := newAuditor(up)
	go func() { audited <- s.auditLoop(actx, log, q, st, a, emit) }()
	defer func() {
		stopAudit()
		<-audited
	}()
	for {
		select {
		case <-ctx.Done():
			return outcome{ready: time.Since(up)}
		case err := <-audited:
			audited <- nil // for the deferred wait
			return outcome{err: err, ready: time.Since(up)}
		case <-timer.C:
			if err := s.poll(ctx, log, q, st, p, emit); err != nil {
				return outcome{err: err, ready: time.Since(up)}
			}
			a.polled.Store(p.from)
			timer.Reset(p.interval)
		case m, ok := <-t.msgs:
			if !ok {
				return outcome{err: t.err, ready: time.Since(up)}
			}
			if err := s.deliver(ctx, q, st, flatten(m.Streams), true, emit); err != nil {
				return outcome{err: err, ready: time.Since(up)}
			}
			if len(m.Dropped) > 0 {
				oldest := noDrop
				for _, d := range m.Dropped {
					if ts, err := strconv.ParseInt(d.Timestamp, 10, 64); err == nil {
						oldest = min(oldest, ts)
					}
				}
				s.m.DroppedEntries(q.Name, len(m.Dropped))
				log.Warn("tail dropped entries; catching up with query_range", "dropped", len(m.Dropped), "oldest", unixTime(min(oldest, time.Now().UnixNano())))
				return outcome{dropped: true, dropFrom: oldest, ready: time.Since(up)}
			}
		}
	}
}

// catchUp emits the entries from from (inclusive) to now plus CreationGracePeriod:
// in windows no longer than MaxQueryLength, each read page by page.
func (s *Source) catchUp(ctx context.Context, log *slog.Logger, q Query, st *queryState, from int64, emit func(logstream.Line) error) error {
	t0 := time.Now()
	if s.cfg.MaxCatchUp > 0 {
		if limit := t0.Add(-s.cfg.MaxCatchUp).UnixNano(); from < limit {
			log.Warn("position older than max catch-up; skipping lines", "position", unixTime(from), "from", unixTime(limit))
			from = limit
		}
	}
	// Into the future as far as Loki accepts lines (a leading node clock); +1:
	// query_range's end is exclusive.
	end := t0.UnixNano() + int64(s.cfg.CreationGracePeriod) + 1
	if err := s.readRange(ctx, log, q, st, from, end, emit); err != nil {
		return err
	}
	s.caughtUp(st)
	return nil
}

// readRange emits the entries from from (inclusive) to end (exclusive), Unix ns: in
// windows no longer than MaxQueryLength, each read page by page. It is the catch-up
// of the live source and the whole of History.
func (s *Source) readRange(ctx context.Context, log *slog.Logger, q Query, st *queryState, from, end int64, emit func(logstream.Line) error) error {
	t0 := time.Now()
	maxSpan, maxLimit := int64(s.cfg.MaxQueryLength), s.cfg.PageLimit
	// Caps for this catch-up: Loki's max_query_length when shorter than configured,
	// pages of fewer lines when lines are big.
	spanCap, limitCap := maxSpan, maxLimit
	if c := int(s.pageCap.Load()); c > 0 {
		limitCap = min(limitCap, c)
	}
	st.mu.Lock()
	set := st.size.init(maxSpan, maxLimit)
	sz := st.size
	st.mu.Unlock()
	if set {
		s.m.CatchUpSize(q.Name, time.Duration(sz.span), sz.limit)
	}
	start := from
	pages, n := 0, 0
	// dense bounds the window after a full page (0: unbounded): to answer a page,
	// Loki reads every selected stream from the window's start until it has the
	// page or reaches the window's end, so a wide window over a dense stretch costs
	// the whole window's lines for one page of them. After a full page the next
	// window spans twice the stretch that page covered; each window that does not
	// fill its page doubles it.
	var dense int64
	for start < end {
		span, limit := min(spanCap, sz.span), min(limitCap, sz.limit)
		if dense > 0 {
			span = min(span, dense)
		}
		now := time.Now().UnixNano()
		if start+span >= now {
			// After now there are only lines of leading node clocks: the window
			// reaching past now goes to the end at once, so a shrunk window does not
			// cost a query per window up to CreationGracePeriod ahead.
			span = spanCap
		}
		wend := min(end, start+span)
		es, err := s.queryRange(ctx, q.LogQL, start, wend, limit)
		reason, slow := slowAnswer(ctx, err)
		switch {
		case errors.Is(err, errTooLarge) && limit > 1:
			// Big lines: the same stretch again in smaller pages (for the rest of
			// this catch-up).
			s.m.ReadLimit(q.Name, "response")
			limitCap = max(1, limit/2)
			log.Warn("Loki's answer exceeds the response size limit; asking for smaller pages", "limit_bytes", s.cfg.MaxResponseBytes, "page_limit", limitCap)
			continue
		case entriesLimit(err, limit) > 0:
			// Loki's max_entries_limit_per_query is lower than the page asked:
			// asked again at Loki's limit, for every page from now on.
			limitCap = entriesLimit(err, limit)
			if s.pageCap.Swap(int64(limitCap)) != int64(limitCap) {
				log.Warn("Loki refused the page size; asking for pages of its limit", "page_limit", limitCap, "err", err)
			}
			continue
		case isQueryTooLong(err) && span > int64(time.Minute):
			// Loki's max_query_length is shorter than configured.
			spanCap = span / 2
			log.Warn("Loki refused the time range; asking for shorter windows", "window", time.Duration(spanCap), "err", err)
			continue
		case slow:
			s.m.CatchUpShrink(q.Name, reason)
			st.mu.Lock()
			// Halve what was asked of the past: the future part holds next to nothing.
			shrunk := st.size.shrink(max(1, min(wend, now)-start), maxLimit)
			sz = st.size
			st.mu.Unlock()
			if !shrunk {
				return fmt.Errorf("loki query_range of %s from %s (window and page at their floors): %w", q.Name, unixTime(start), err)
			}
			s.m.CatchUpSize(q.Name, time.Duration(sz.span), sz.limit)
			log.Warn("Loki did not answer in time; asking for shorter windows and smaller pages",
				"reason", reason, "window", time.Duration(sz.span), "page_limit", sz.limit, "err", err)
			continue
		case errors.Is(err, errTooLarge):
			s.m.ReadLimit(q.Name, "response")
			return fmt.Errorf("one entry at %s exceeds the response size limit of %d bytes: %w", unixTime(start), s.cfg.MaxResponseBytes, err)
		case err != nil:
			return err
		}
		st.mu.Lock()
		grown := st.size.success(wend-start, maxSpan, maxLimit)
		sz = st.size
		st.mu.Unlock()
		if grown {
			s.m.CatchUpSize(q.Name, time.Duration(sz.span), sz.limit)
			log.Info("Loki answers again; asking for longer windows and larger pages", "window", time.Duration(sz.span), "page_limit", sz.limit)
		}
		pages++
		n += len(es)
		if err := s.deliver(ctx, q, st, es, false, emit); err != nil {
			return err
		}
		if len(es) < limit {
			start = wend // this window is done
			if dense > 0 {
				dense = min(2*dense, maxSpan)
			}
			continue
		}
		last := es[len(es)-1].ts
		if last <= start {
			log.Warn("a whole page shares one timestamp; skipping the rest of that timestamp", "timestamp", unixTime(last), "limit", limit)
			last = start + 1
		}
		dense = max(minDenseSpan, 2*(last-start))
		start = last
	}
	log.Debug("caught up", "from", unixTime(from), "pages", pages, "entries", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// deliver emits the entries not emitted before, in order.
func (s *Source) deliver(ctx context.Context, q Query, st *queryState, es []entry, live bool, emit func(logstream.Line) error) error {
	if len(es) == 0 {
		return nil
	}
	// One read at a time per query (the tail and polls, and the audit beside them):
	// an entry is looked up, emitted and remembered before another read sees it.
	st.deliverMu.Lock()
	defer st.deliverMu.Unlock()
	emitted, dups, missed, polled, ahead, behind, earlier := 0, 0, 0, 0, 0, 0, 0
	st.mu.Lock()
	missedBefore := st.missedBefore
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		st.counts.dups += int64(dups)
		st.counts.missed += int64(missed)
		st.counts.polled += int64(polled)
		if live {
			st.counts.redelivered += int64(dups)
		}
		newest := st.win.maxTs
		st.mu.Unlock()
		if emitted > 0 {
			s.m.Lines(q.Name, emitted)
			s.m.Lag(q.Name, time.Duration(time.Now().UnixNano()-newest))
		}
		if dups > 0 {
			s.m.Duplicates(q.Name, dups)
		}
		if ahead > 0 {
			s.m.ClockClamped(q.Name, "ahead", ahead)
		}
		if behind > 0 {
			s.m.ClockClamped(q.Name, "behind", behind)
		}
		if earlier > 0 {
			s.m.EarlierBoot(q.Name, earlier)
			s.log.Info("skipped lines from an earlier boot of their node", "query", q.Name, "lines", earlier)
		}
	}()
	for _, e := range es {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := entryKey(e.stream, e.metaNode(s.cfg.NodeLabel), e.ts, e.line)
		if st.keep != nil && !st.keep(k, e.ts) {
			continue
		}
		st.mu.Lock()
		dup := st.win.seen(k)
		st.mu.Unlock()
		if dup {
			dups++
			continue
		}
		now := time.Now()
		// A line is dated by its node's clock; the controller's clock bounds it, so
		// a node clock ahead cannot make evidence from the future and one behind
		// cannot make a line the tail just delivered look old (and a fault end early).
		at := e.ts
		switch {
		case at > now.UnixNano():
			at = now.UnixNano()
			ahead++
		case live && now.UnixNano()-at > int64(s.cfg.ClockTolerance):
			at = now.UnixNano()
			behind++
		}
		line := s.toEntry(q, e, at)
		if s.boots.earlier(line.Node, line.Labels[logstream.MetaBootID], line.Time, now) {
			earlier++
		} else {
			s.emitMu.Lock()
			err := emit(line)
			s.emitMu.Unlock()
			if err != nil {
				return &emitError{err: err}
			}
			emitted++
			if !live && missedBefore > 0 {
				polled++
				if e.ts < missedBefore {
					missed++
				}
			}
		}
		st.mu.Lock()
		st.win.add(k, e.ts, now.UnixNano())
		st.mu.Unlock()
	}
	return nil
}

// toEntry converts e, dated at (Unix ns).
func (s *Source) toEntry(q Query, e entry, at int64) logstream.Line {
	labels := e.labels
	if len(e.meta) > 0 {
		labels = make(map[string]string, len(e.labels)+len(e.meta))
		for k, v := range e.meta {
			labels[k] = v
		}
		for k, v := range e.labels {
			labels[k] = v
		}
	}
	return logstream.Line{Query: q.Name, Stream: e.stream, Labels: labels, Node: labels[s.cfg.NodeLabel],
		Source: labels[logstream.LabelSource], Time: time.Unix(0, at), Text: e.line}
}

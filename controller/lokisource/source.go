// Package lokisource reads the candidate log lines of the rule packs from Grafana
// Loki, without gaps and without duplicates, across reconnects and restarts.
//
// Each Query (one per log source, its line filter built from the packs' literals by
// EngineQueries) runs a cycle:
//
//  1. catch up with query_range (direction=forward), from the query's position to
//     now plus CreationGracePeriod, in windows no longer than MaxQueryLength, each
//     page by page: each next page starts at the last entry's timestamp
//     (inclusive), until a page comes back with fewer than PageLimit entries (a
//     page over MaxResponseBytes is asked again with half the entries, and one Loki
//     does not answer in time, within QueryTimeout, is asked again for a shorter
//     window and a smaller page, which grow back once Loki answers);
//  2. open the tail websocket, starting at the newest entry read;
//  3. once Loki has registered the tail (its first ping or message), catch up once
//     more from the position minus Overlap, which covers whatever arrived between
//     step 1 and the tail and more than the tail's own history (at most PageLimit
//     entries) could hold;
//  4. stream the tail until it ends, fails or reports dropped_entries, polling
//     with query_range meanwhile (poll.go); then start again at step 1, after a
//     backoff when Loki failed.
//
// Reads overlap on purpose; every query deduplicates its entries by a hash of
// (stream labels, timestamp, line) over a window of DedupeWindow of entry time, so
// each entry is emitted once. Entries are emitted in the order they are read (time
// order within a catch-up page; tail order otherwise), calls to emit are serialized
// across queries, and a query's position advances only after emit returned.
//
// A query Loki refuses (400) is reported by Health and the metrics and runs its last
// accepted LogQL instead; lines are dated by the controller's clock when their node's
// clock leads, or lags on a line the tail just delivered (ClockTolerance); with
// Config.BootID, lines of an earlier boot of their node are skipped.
//
// Checkpoint returns the positions to persist; Run resumes from them. A position
// lists the entries emitted in its last Overlap of entry time, so a restarted Source
// re-reads that stretch and emits only the lines it had not emitted — including
// lines that reached Loki late, with timestamps older than lines already read.
//
// History reads a stretch of the past through the same catch-up reads, without the
// tail, merged by time across the queries: the source of `faultline replay`.
package lokisource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/faultline-dev/faultline/logstream"
)

// Source follows Loki queries. Its methods are safe for concurrent use.
type Source struct {
	cfg    Config
	base   *url.URL
	http   *http.Client
	dialer *websocket.Dialer
	log    *slog.Logger
	m      Metrics
	boots  *bootTracker // nil without Config.BootID

	emitMu sync.Mutex // serializes emit across queries
	// pageCap is Loki's max_entries_limit_per_query once a page above it was
	// refused (0: none seen); pages ask for no more from then on.
	pageCap atomic.Int64

	mu      sync.Mutex
	queries []Query
	states  map[string]*queryState
	start   int64 // Unix ns where a query without a position starts
	run     *running
	refused map[string]refusal // by query name
}

// queryState is one query's read position and dedupe window; it outlives the
// goroutine following the query (SetQueries may restart that with a new filter).
type queryState struct {
	deliverMu sync.Mutex // held by deliver
	mu        sync.Mutex
	win       *window
	good      string // the last LogQL Loki accepted
	size      readSize
	counts    readCounts
	// missedBefore (Unix ns) is set while a poll runs, 0 otherwise: see readCounts.
	missedBefore int64
	// keep, when set, passes over the entries it rejects (Warm reads only the
	// entries a resumed Run will not emit).
	keep func(k key, ts int64) bool
	// behind: one of the queries a run began with, whose first catch-up has not
	// ended (see CaughtUp).
	behind bool
}

// readCounts count what reads found, for the poll's schedule.
type readCounts struct {
	// dups: entries skipped as emitted before; polled: entries a poll emitted (read
	// before the tail delivered them), missed: those of them with a timestamp
	// before missedBefore (lines the tail should have delivered already);
	// redelivered: entries the tail delivered after a read had emitted them.
	dups, polled, missed, redelivered int64
}

type running struct {
	ctx     context.Context
	cancel  context.CancelFunc
	emit    func(logstream.Line) error
	wg      sync.WaitGroup
	runners map[string]*runner

	errOnce sync.Once
	err     error
}

func (r *running) fail(err error) {
	r.errOnce.Do(func() { r.err = err })
	r.cancel()
}

type runner struct {
	q      Query
	cancel context.CancelFunc
	done   chan struct{}
}

// New checks cfg, applies defaults and returns a Source; it does not contact Loki.
func New(cfg Config) (*Source, error) {
	base, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("lokisource: url: %w", err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("lokisource: url %q: want http(s)://host[:port][/prefix]", cfg.URL)
	}
	if err := checkQueries(cfg.Queries); err != nil {
		return nil, err
	}
	if cfg.NodeLabel == "" {
		cfg.NodeLabel = logstream.LabelNode
	}
	if cfg.PageLimit <= 0 {
		cfg.PageLimit = DefaultPageLimit
	}
	if cfg.DelayFor < 0 || cfg.DelayFor > 5*time.Second {
		return nil, fmt.Errorf("lokisource: delay_for %s: Loki allows 0 to 5s", cfg.DelayFor)
	}
	if cfg.Backoff.Initial <= 0 {
		cfg.Backoff.Initial = 500 * time.Millisecond
	}
	if cfg.Backoff.Max < cfg.Backoff.Initial {
		cfg.Backoff.Max = max(30*time.Second, cfg.Backoff.Initial)
	}
	if cfg.Overlap <= 0 {
		cfg.Overlap = 30 * time.Second
	}
	if cfg.DedupeWindow <= 0 {
		cfg.DedupeWindow = 10 * time.Minute
	}
	cfg.DedupeWindow = max(cfg.DedupeWindow, 2*cfg.Overlap)
	if cfg.MaxDedupeKeys <= 0 {
		cfg.MaxDedupeKeys = 200000
	}
	cfg.MaxDedupeKeys = max(cfg.MaxDedupeKeys, 2*cfg.PageLimit)
	if cfg.CheckpointKeys <= 0 {
		cfg.CheckpointKeys = 1000
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.MaxQueryLength <= 0 {
		cfg.MaxQueryLength = 721 * time.Hour
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = 16 << 20
	}
	if cfg.CreationGracePeriod <= 0 {
		cfg.CreationGracePeriod = 10 * time.Minute
	}
	if cfg.ClockTolerance <= 0 {
		cfg.ClockTolerance = time.Minute
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.TailIdleTimeout <= 0 {
		cfg.TailIdleTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	tlsCfg, err := cfg.TLS.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("lokisource: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	s := &Source{
		cfg:  cfg,
		base: base,
		http: &http.Client{Transport: tr},
		dialer: &websocket.Dialer{
			Proxy:            http.ProxyFromEnvironment,
			TLSClientConfig:  tlsCfg,
			HandshakeTimeout: 15 * time.Second,
		},
		log:     cfg.Logger.With("component", "lokisource"),
		m:       cfg.Metrics,
		boots:   newBootTracker(cfg.BootID),
		queries: slices.Clone(cfg.Queries),
		states:  map[string]*queryState{},
		refused: map[string]refusal{},
	}
	return s, nil
}

func checkQueries(qs []Query) error {
	seen := map[string]bool{}
	for _, q := range qs {
		if q.Name == "" || q.LogQL == "" {
			return fmt.Errorf("lokisource: query %q: name and LogQL are required", q.Name)
		}
		if seen[q.Name] {
			return fmt.Errorf("lokisource: query name %q used twice", q.Name)
		}
		seen[q.Name] = true
	}
	return nil
}

// Queries returns the queries the Source follows.
func (s *Source) Queries() []Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// SetQueries replaces the queries, for example after the rule packs changed. While
// Run is active, a query whose LogQL changed restarts from its current position
// (keeping its dedupe window), a new query starts at the overall checkpoint, and a
// removed query stops and leaves the checkpoint.
func (s *Source) SetQueries(qs []Query) error {
	if err := checkQueries(qs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = slices.Clone(qs)
	r := s.run
	if r == nil {
		return nil
	}
	want := map[string]Query{}
	for _, q := range qs {
		want[q.Name] = q
	}
	for name, rn := range r.runners {
		if _, ok := want[name]; !ok {
			rn.cancel()
			delete(r.runners, name)
			delete(s.states, name)
			s.clearRefusalLocked(name)
			s.log.Info("query removed", "query", name)
		}
	}
	for _, q := range qs {
		rn, ok := r.runners[q.Name]
		switch {
		case !ok:
			s.log.Info("query added", "query", q.Name, "logql", q.LogQL)
			s.startRunnerLocked(r, q, nil)
		case rn.q.LogQL != q.LogQL:
			s.log.Info("query changed", "query", q.Name, "logql", q.LogQL)
			s.clearRefusalLocked(q.Name)
			rn.cancel()
			s.startRunnerLocked(r, q, rn)
		}
	}
	return nil
}

// Checkpoint returns the current positions (see Checkpoint); persist it and pass it
// to Run after a restart. Its Min is the overall checkpoint.
func (s *Source) Checkpoint() Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Checkpoint{Queries: make(map[string]Position, len(s.states))}
	for name, st := range s.states {
		st.mu.Lock()
		c.Queries[name] = st.win.position(s.cfg.Overlap, s.cfg.CheckpointKeys)
		st.mu.Unlock()
	}
	if len(c.Queries) == 0 {
		if s.start != 0 {
			c.Start = unixTime(s.start)
		}
		c.Queries = nil
	} else {
		c.Start = c.Min()
	}
	return c
}

// Run follows the queries from the checkpoint from and calls emit with each new
// entry, never concurrently. It returns nil when ctx ends, or the error of emit if
// emit fails; it retries every failure of Loki with backoff, except a query Loki
// refuses (400 Bad Request): that query runs its last accepted LogQL instead, or
// stops when it has none, and Health reports it until SetQueries changes it. Use
// StartAt(t) to begin every query at t; the zero Checkpoint begins at the current
// time.
func (s *Source) Run(ctx context.Context, from Checkpoint, emit func(logstream.Line) error) error {
	s.mu.Lock()
	if s.run != nil {
		s.mu.Unlock()
		return errors.New("lokisource: Run is already active")
	}
	start := from.Start
	if start.IsZero() {
		start = time.Now()
	}
	s.start = start.UnixNano()
	states := map[string]*queryState{}
	for _, q := range s.queries {
		st := &queryState{win: newWindow(s.start, s.cfg.DedupeWindow, s.cfg.MaxDedupeKeys)}
		if p, ok := from.Queries[q.Name]; ok {
			w, err := restoreWindow(p, s.cfg.DedupeWindow, s.cfg.MaxDedupeKeys)
			if err != nil {
				s.mu.Unlock()
				return fmt.Errorf("lokisource: checkpoint of query %q: %w", q.Name, err)
			}
			st.win = w
		}
		states[q.Name] = st
	}
	for _, st := range states {
		st.behind = true
	}
	s.states = states
	clear(s.refused)
	rctx, cancel := context.WithCancel(ctx)
	r := &running{ctx: rctx, cancel: cancel, emit: emit, runners: map[string]*runner{}}
	s.run = r
	for _, q := range s.queries {
		s.startRunnerLocked(r, q, nil)
	}
	s.mu.Unlock()

	<-rctx.Done()
	s.mu.Lock()
	for _, rn := range r.runners {
		rn.cancel()
	}
	s.run = nil
	s.mu.Unlock()
	r.wg.Wait()
	cancel()
	return r.err
}

// CaughtUp reports whether the run has read every query up to the time it began:
// each query the run began with has ended its first catch-up (from the checkpoint
// the run started at), or was refused. Until then the lines since the checkpoint
// are not all decided, and state rebuilt from them (a storm) is not whole yet.
// A query removed since (SetQueries) is not waited for.
func (s *Source) CaughtUp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return false // not running
	}
	for _, st := range s.states {
		st.mu.Lock()
		behind := st.behind
		st.mu.Unlock()
		if behind {
			return false
		}
	}
	return true
}

// caughtUp notes that st's query has read up to the time of its first catch-up.
func (s *Source) caughtUp(st *queryState) {
	st.mu.Lock()
	st.behind = false
	st.mu.Unlock()
}

// startRunnerLocked starts following q; after prev (the previous runner of the same
// query, already cancelled) has finished. s.mu must be held.
func (s *Source) startRunnerLocked(r *running, q Query, prev *runner) {
	st, ok := s.states[q.Name]
	if !ok {
		// A new query starts at the overall checkpoint (the oldest position), or at
		// the start of the run when there is none.
		start := s.start
		if len(s.states) > 0 {
			start = math.MaxInt64
			for _, other := range s.states {
				other.mu.Lock()
				start = min(start, other.win.maxTs)
				other.mu.Unlock()
			}
		}
		st = &queryState{win: newWindow(start, s.cfg.DedupeWindow, s.cfg.MaxDedupeKeys)}
		s.states[q.Name] = st
	}
	ctx, cancel := context.WithCancel(r.ctx)
	rn := &runner{q: q, cancel: cancel, done: make(chan struct{})}
	r.runners[q.Name] = rn
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(rn.done)
		defer cancel()
		if prev != nil {
			<-prev.done
		}
		log := s.log.With("query", q.Name)
		for {
			err := s.follow(ctx, log, q, st, r.emit)
			if err == nil || ctx.Err() != nil {
				return
			}
			var re *refusedError
			if !errors.As(err, &re) {
				r.fail(err)
				return
			}
			good := s.refuse(log, q, st, re.err)
			if good == "" {
				s.caughtUp(st) // it reads nothing more
				return
			}
			q.LogQL = good
		}
	}()
}

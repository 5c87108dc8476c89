// Package lokisource reads the candidate log lines of the rule packs from Grafana
// Loki, without gaps and without duplicates, across reconnects and restarts.
//
// Each Query (one per log source, its line filter built from the packs' literals by
// BuildQueries or EngineQueries) runs a cycle:
//
//  1. catch up with query_range (direction=forward), from the query's position to
//     now, page by page: each next page starts at the last entry's timestamp
//     (inclusive), until a page comes back with fewer than PageLimit entries;
//  2. open the tail websocket, starting at the newest entry read;
//  3. once Loki has registered the tail (its first ping or message), catch up once
//     more from the position minus Overlap, which covers whatever arrived between
//     step 1 and the tail and more than the tail's own history (at most PageLimit
//     entries) could hold;
//  4. stream the tail until it ends, fails or reports dropped_entries; then start
//     again at step 1, after a backoff when Loki failed.
//
// Reads overlap on purpose; every query deduplicates its entries by a hash of
// (stream labels, timestamp, line) over a window of DedupeWindow of entry time, so
// each entry is emitted once. Entries are emitted in the order they are read (time
// order within a catch-up page; tail order otherwise), calls to emit are serialized
// across queries, and a query's position advances only after emit returned.
//
// Checkpoint returns the positions to persist; Run resumes from them. A position
// lists the entries emitted in its last Overlap of entry time, so a restarted Source
// re-reads that stretch and emits only the lines it had not emitted — including
// lines that reached Loki late, with timestamps older than lines already read.
package lokisource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/faultline-dev/faultline/logstream"
)

// Config configures a Source. Only URL and Queries are required.
type Config struct {
	// URL is Loki's base URL (http or https), for example http://loki:3100 or
	// https://gateway.example/loki; the API paths are appended to it.
	URL string
	// Tenant is sent as X-Scope-OrgID when set.
	Tenant string
	// BearerToken, or BearerTokenFile (read again for every request, as projected
	// service account tokens rotate), or Username and Password (basic auth).
	BearerToken     string
	BearerTokenFile string
	Username        string
	Password        string
	// TLS configures https and wss connections.
	TLS TLSConfig

	// Queries are the LogQL log queries to follow, with unique names.
	Queries []Query
	// NodeLabel names the label (index label or structured metadata) holding an
	// entry's node; default "node".
	NodeLabel string
	// PageLimit is query_range's limit per page and the tail's limit; default 1000.
	// Loki refuses more than its max_entries_limit_per_query (5000 by default).
	PageLimit int
	// DelayFor is the tail's delay_for (0 to 5 s, whole seconds): how long Loki holds
	// entries to order them.
	DelayFor time.Duration
	// Backoff between attempts while Loki is unreachable or failing.
	Backoff Backoff

	// Overlap is how far back (in entry time) a query re-reads after a reconnect or
	// a restart, to pick up lines that reached Loki late; default 30s.
	Overlap time.Duration
	// DedupeWindow is how long (in entry time) a query remembers the entries it
	// emitted; default 10m, at least 2*Overlap.
	DedupeWindow time.Duration
	// MaxDedupeKeys bounds the entries remembered per query (the window shrinks
	// when more arrive); default 200000.
	MaxDedupeKeys int
	// CheckpointKeys bounds the entries a checkpoint lists per query; default 1000.
	CheckpointKeys int
	// MaxCatchUp, when set, limits how far back a query reads: a position older
	// than now-MaxCatchUp starts there instead (logged as a gap).
	MaxCatchUp time.Duration
	// QueryTimeout bounds one query_range request; default 1m.
	QueryTimeout time.Duration
	// PollInterval: while tailing, the query is also read with query_range this
	// often (from the position, deduplicated), because Loki's tail can stop
	// delivering a busy stream without reporting dropped entries; default 2s.
	PollInterval time.Duration
	// TailIdleTimeout: a tail that sends nothing, not even a ping (Loki pings every
	// second), for this long is considered dead; default 30s.
	TailIdleTimeout time.Duration

	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics defaults to none; see NewPrometheusMetrics.
	Metrics Metrics
}

// TLSConfig configures TLS to Loki.
type TLSConfig struct {
	// CAFile holds the PEM certificates to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a client certificate (read again at each handshake).
	CertFile string
	KeyFile  string
	// ServerName overrides the name verified in the server certificate.
	ServerName         string
	InsecureSkipVerify bool
}

// Backoff is an exponential backoff with jitter: attempt n waits a random time
// between half and all of min(Initial*2^n, Max).
type Backoff struct {
	Initial time.Duration // default 500ms
	Max     time.Duration // default 30s
}

// Source follows Loki queries. Its methods are safe for concurrent use.
type Source struct {
	cfg    Config
	base   *url.URL
	http   *http.Client
	dialer *websocket.Dialer
	log    *slog.Logger
	m      Metrics

	emitMu sync.Mutex // serializes emit across queries

	mu      sync.Mutex
	queries []Query
	states  map[string]*queryState
	start   int64 // Unix ns where a query without a position starts
	run     *running
}

// queryState is one query's read position and dedupe window; it outlives the
// goroutine following the query (SetQueries may restart that with a new filter).
type queryState struct {
	mu  sync.Mutex
	win *window
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
		cfg.PageLimit = 1000
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
		cfg.QueryTimeout = time.Minute
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
		queries: slices.Clone(cfg.Queries),
		states:  map[string]*queryState{},
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
// entry, never concurrently. It returns nil when ctx ends, the error of emit if emit
// fails, or an error Loki cannot recover from (a query it rejects with 400 Bad
// Request); it retries every other failure with backoff. Use StartAt(t) to begin
// every query at t; the zero Checkpoint begins at the current time.
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
	s.states = states
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
		if err := s.follow(ctx, q, st, r.emit); err != nil && ctx.Err() == nil {
			r.fail(err)
		}
	}()
}

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
func (s *Source) follow(ctx context.Context, q Query, st *queryState, emit func(logstream.Line) error) error {
	log := s.log.With("query", q.Name)
	bo := backoff{cfg: s.cfg.Backoff}
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
			return fmt.Errorf("lokisource: query %q: %w", q.Name, o.err)
		}
		if o.ready >= healthyTail || o.dropped {
			bo.reset()
		}
		var reason string
		var wait time.Duration
		switch {
		case o.dropped:
			reason = "dropped"
			dropFrom = o.dropFrom
		case isClose(o.err):
			reason = "closed"
			wait = bo.next()
			log.Info("tail ended by Loki; reconnecting", "err", o.err, "up", o.ready.Round(time.Millisecond), "retry_in", wait.Round(time.Millisecond))
		default:
			reason = "error"
			wait = bo.next()
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
	if err := s.catchUp(ctx, log, q, st, from, emit); err != nil {
		return outcome{err: err}
	}
	st.mu.Lock()
	tailStart := st.win.maxTs
	again := st.win.resumeFrom(s.cfg.Overlap)
	st.mu.Unlock()

	h, err := s.header()
	if err != nil {
		return outcome{err: err}
	}
	conn, resp, err := s.dialer.DialContext(ctx, s.tailURL(q.LogQL, tailStart, s.cfg.PageLimit), h)
	if err != nil {
		if resp != nil {
			body := make([]byte, 1024)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			return outcome{err: &statusError{op: "tail", code: resp.StatusCode, status: resp.Status, body: string(body[:n])}}
		}
		return outcome{err: fmt.Errorf("loki tail: %w", err)}
	}
	t := newTailReader(conn, s.cfg.TailIdleTimeout)
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
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return outcome{ready: time.Since(up)}
		case <-poll.C:
			// A short overlap: this only covers what the tail missed; lines that
			// reach Loki later still are read after a reconnect (Overlap).
			st.mu.Lock()
			from := st.win.resumeFrom(min(s.cfg.Overlap, 5*time.Second))
			st.mu.Unlock()
			if err := s.catchUp(ctx, log, q, st, from, emit); err != nil {
				return outcome{err: err, ready: time.Since(up)}
			}
		case m, ok := <-t.msgs:
			if !ok {
				return outcome{err: t.err, ready: time.Since(up)}
			}
			if err := s.deliver(ctx, q, st, flatten(m.Streams), emit); err != nil {
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

// catchUp emits the entries from from (inclusive) to now, page by page.
func (s *Source) catchUp(ctx context.Context, log *slog.Logger, q Query, st *queryState, from int64, emit func(logstream.Line) error) error {
	t0 := time.Now()
	if s.cfg.MaxCatchUp > 0 {
		if limit := t0.Add(-s.cfg.MaxCatchUp).UnixNano(); from < limit {
			log.Warn("position older than max catch-up; skipping lines", "position", unixTime(from), "from", unixTime(limit))
			from = limit
		}
	}
	end := t0.UnixNano() + 1 // query_range's end is exclusive
	start := from
	pages, n := 0, 0
	for {
		es, err := s.queryRange(ctx, q.LogQL, start, end, s.cfg.PageLimit)
		if err != nil {
			return err
		}
		pages++
		n += len(es)
		if err := s.deliver(ctx, q, st, es, emit); err != nil {
			return err
		}
		if len(es) < s.cfg.PageLimit {
			break
		}
		last := es[len(es)-1].ts
		if last <= start {
			log.Warn("a whole page shares one timestamp; skipping the rest of that timestamp", "timestamp", unixTime(last), "limit", s.cfg.PageLimit)
			last = start + 1
		}
		start = last
	}
	log.Debug("caught up", "from", unixTime(from), "pages", pages, "entries", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// deliver emits the entries not emitted before, in order.
func (s *Source) deliver(ctx context.Context, q Query, st *queryState, es []entry, emit func(logstream.Line) error) error {
	if len(es) == 0 {
		return nil
	}
	emitted, dups := 0, 0
	defer func() {
		if emitted > 0 {
			s.m.Lines(q.Name, emitted)
			st.mu.Lock()
			newest := st.win.maxTs
			st.mu.Unlock()
			s.m.Lag(q.Name, time.Duration(time.Now().UnixNano()-newest))
		}
		if dups > 0 {
			s.m.Duplicates(q.Name, dups)
		}
	}()
	for _, e := range es {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := entryKey(e.stream, e.ts, e.line)
		st.mu.Lock()
		dup := st.win.seen(k)
		st.mu.Unlock()
		if dup {
			dups++
			continue
		}
		s.emitMu.Lock()
		err := emit(s.toEntry(q, e))
		s.emitMu.Unlock()
		if err != nil {
			return &emitError{err: err}
		}
		st.mu.Lock()
		st.win.add(k, e.ts, time.Now().UnixNano())
		st.mu.Unlock()
		emitted++
	}
	return nil
}

func (s *Source) toEntry(q Query, e entry) logstream.Line {
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
		Source: labels[logstream.LabelSource], Time: time.Unix(0, e.ts), Text: e.line}
}

// tailReader reads tail messages from a websocket into msgs, which it closes at the
// end with err set.
type tailReader struct {
	conn      *websocket.Conn
	idle      time.Duration
	msgs      chan tailMessage
	ready     chan struct{} // closed at the first ping or message
	done      chan struct{} // closed when the reader ends
	quit      chan struct{}
	err       error
	readyOnce sync.Once
	closeOnce sync.Once
}

func newTailReader(conn *websocket.Conn, idle time.Duration) *tailReader {
	t := &tailReader{conn: conn, idle: idle, msgs: make(chan tailMessage, 16),
		ready: make(chan struct{}), done: make(chan struct{}), quit: make(chan struct{})}
	conn.SetPingHandler(func(data string) error {
		t.markReady()
		_ = conn.SetReadDeadline(time.Now().Add(idle))
		// Answer like the default handler; a failed pong shows up as a read error.
		_ = conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		return nil
	})
	go t.loop()
	return t
}

func (t *tailReader) markReady() { t.readyOnce.Do(func() { close(t.ready) }) }

func (t *tailReader) loop() {
	defer close(t.done)
	defer close(t.msgs)
	for {
		_ = t.conn.SetReadDeadline(time.Now().Add(t.idle))
		_, b, err := t.conn.ReadMessage()
		if err != nil {
			t.err = fmt.Errorf("loki tail: %w", err)
			return
		}
		var m tailMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.err = fmt.Errorf("loki tail: decode message: %w", err)
			return
		}
		t.markReady()
		select {
		case t.msgs <- m:
		case <-t.quit:
			t.err = errors.New("loki tail: closed")
			return
		}
	}
}

// close ends the connection (politely) and the reader; safe to call more than once.
func (t *tailReader) close() {
	t.closeOnce.Do(func() {
		close(t.quit)
		_ = t.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = t.conn.Close()
	})
}

// backoff is exponential with jitter.
type backoff struct {
	cfg Backoff
	n   int
}

func (b *backoff) reset() { b.n = 0 }

func (b *backoff) next() time.Duration {
	d := b.cfg.Initial
	for i := 0; i < b.n && d < b.cfg.Max; i++ {
		d *= 2
	}
	d = min(d, b.cfg.Max)
	b.n++
	return d/2 + rand.N(d/2+1)
}

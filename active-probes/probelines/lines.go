package probelines

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
)

// Defaults of Config.
const (
	// DefaultPerCheck: one line per check per minute in the long run, far more than a
	// schedule asks (the shortest sane interval is minutes) ...
	DefaultPerCheck = rate.Limit(1.0 / 60)
	// DefaultBurst: ... with room for a burst of runs (a confirmation, its recovery
	// probes, an operator's few manual runs) before lines are dropped.
	DefaultBurst = 10
	// DefaultQueue is how many lines wait for the shipping path at most.
	DefaultQueue = 256
)

// Config configures Lines.
type Config struct {
	// Node is the agent's node, the lines' node label.
	Node string
	// Ship sends one record on; it waits while the shipping path is full and returns
	// false when ctx ended first (exporter.Lane.Ship).
	Ship func(ctx context.Context, rec ship.Record) bool
	// PerCheck and Burst bound the lines of each check (a token bucket per check).
	PerCheck rate.Limit
	Burst    int
	// Queue bounds the lines waiting for Ship.
	Queue   int
	Metrics *Metrics
	Log     *slog.Logger
	// Now stamps the lines (default time.Now).
	Now func() time.Time
}

// Lines ships the agent's verdicts as source="probe" lines.
type Lines struct {
	cfg   Config
	queue chan ship.Record

	mu     sync.Mutex
	checks map[string]*rate.Limiter
}

// New returns Lines; Run ships what Report queues.
func New(cfg Config) (*Lines, error) {
	if cfg.Node == "" || cfg.Ship == nil {
		return nil, errors.New("probe lines: a node and a Ship function are required")
	}
	if cfg.PerCheck <= 0 {
		cfg.PerCheck = DefaultPerCheck
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Lines{cfg: cfg, queue: make(chan ship.Record, cfg.Queue), checks: map[string]*rate.Limiter{}}, nil
}

// Report queues the line of one result; it never waits, so a slow receiver never
// delays a run's answer. A line over its check's bound, or that finds the queue
// full, is dropped and counted.
func (l *Lines) Report(res probe.Result, trigger string) {
	if !l.limiter(res.Check).Allow() {
		l.cfg.Metrics.dropped.WithLabelValues(dropRate).Inc()
		return
	}
	rec := ship.Record{Time: l.cfg.Now(), Body: Format(res, trigger), Source: ship.SourceProbe,
		Node: l.cfg.Node, Level: level(res.Status)}
	select {
	case l.queue <- rec:
		l.cfg.Metrics.lines.WithLabelValues(res.Check, string(res.Status)).Inc()
	default:
		l.cfg.Metrics.dropped.WithLabelValues(dropQueue).Inc()
	}
}

func (l *Lines) limiter(check string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.checks[check]
	if !ok {
		lim = rate.NewLimiter(l.cfg.PerCheck, l.cfg.Burst)
		l.checks[check] = lim
	}
	return lim
}

// Run hands the queued lines to Ship until ctx ends.
func (l *Lines) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case rec := <-l.queue:
			if !l.cfg.Ship(ctx, rec) {
				return
			}
		}
	}
}

// Why a line was dropped (the reason label of faultline_probe_verdict_lines_dropped_total).
const (
	dropRate  = "rate"
	dropQueue = "queue"
)

// Metrics count the lines.
type Metrics struct {
	lines   *prometheus.CounterVec
	dropped *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_probe_verdict_lines_total", Help: "Verdict lines queued for shipping with source=\"probe\", by check and status.",
		}, []string{"check", "status"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_probe_verdict_lines_dropped_total", Help: "Verdict lines dropped, by reason: rate (over the check's bound), queue (the shipping path full).",
		}, []string{"reason"}),
	}
	m.dropped.WithLabelValues(dropRate)
	m.dropped.WithLabelValues(dropQueue)
	if reg != nil {
		reg.MustRegister(m.lines, m.dropped)
	}
	return m
}

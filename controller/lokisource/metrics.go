package lokisource

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics receives the Source's counters; every method must be safe for concurrent
// use. query is the query's name. NewPrometheusMetrics implements it.
type Metrics interface {
	// Lines counts entries emitted.
	Lines(query string, n int)
	// Duplicates counts entries read again (catch-up overlapping the tail, or a
	// re-read after a reconnect) and not emitted.
	Duplicates(query string, n int)
	// DroppedEntries counts entries Loki's tail reported as dropped (each report
	// makes the query catch up with query_range).
	DroppedEntries(query string, n int)
	// Reconnect counts a new catch-up and tail cycle after the previous one ended;
	// reason is "error" (Loki unreachable or failing), "closed" (Loki ended the tail)
	// or "dropped" (the tail dropped entries).
	Reconnect(query, reason string)
	// Lag reports the wall clock minus the timestamp of the newest entry emitted.
	Lag(query string, d time.Duration)
}

type nopMetrics struct{}

func (nopMetrics) Lines(string, int)          {}
func (nopMetrics) Duplicates(string, int)     {}
func (nopMetrics) DroppedEntries(string, int) {}
func (nopMetrics) Reconnect(string, string)   {}
func (nopMetrics) Lag(string, time.Duration)  {}

// PrometheusMetrics implements Metrics with Prometheus collectors.
type PrometheusMetrics struct {
	lines, duplicates, dropped *prometheus.CounterVec
	reconnects                 *prometheus.CounterVec
	lag                        *prometheus.GaugeVec
}

// NewPrometheusMetrics creates the collectors and registers them with reg (if not nil).
func NewPrometheusMetrics(reg prometheus.Registerer) *PrometheusMetrics {
	m := &PrometheusMetrics{
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_loki_lines_total", Help: "Candidate log lines read from Loki and emitted, by query.",
		}, []string{"query"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_loki_duplicates_total", Help: "Lines read again from Loki (overlapping reads) and skipped, by query.",
		}, []string{"query"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_loki_tail_dropped_entries_total", Help: "Entries Loki's tail reported as dropped (then read with query_range), by query.",
		}, []string{"query"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_loki_reconnects_total", Help: "Catch-up and tail cycles restarted, by query and reason (error, closed, dropped).",
		}, []string{"query", "reason"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "faultline_loki_lag_seconds", Help: "Wall clock minus the timestamp of the newest line emitted, by query.",
		}, []string{"query"}),
	}
	if reg != nil {
		reg.MustRegister(m.lines, m.duplicates, m.dropped, m.reconnects, m.lag)
	}
	return m
}

// Lines implements Metrics.
func (m *PrometheusMetrics) Lines(q string, n int) { m.lines.WithLabelValues(q).Add(float64(n)) }

// Duplicates implements Metrics.
func (m *PrometheusMetrics) Duplicates(q string, n int) {
	m.duplicates.WithLabelValues(q).Add(float64(n))
}

// DroppedEntries implements Metrics.
func (m *PrometheusMetrics) DroppedEntries(q string, n int) {
	m.dropped.WithLabelValues(q).Add(float64(n))
}

// Reconnect implements Metrics.
func (m *PrometheusMetrics) Reconnect(q, reason string) {
	m.reconnects.WithLabelValues(q, reason).Inc()
}

// Lag implements Metrics.
func (m *PrometheusMetrics) Lag(q string, d time.Duration) { m.lag.WithLabelValues(q).Set(d.Seconds()) }

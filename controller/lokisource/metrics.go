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
	// reason is "error" (Loki unreachable or failing), "closed" (Loki ended the tail),
	// "dropped" (the tail dropped entries) or "read_limit" (a tail message over
	// MaxResponseBytes).
	Reconnect(query, reason string)
	// Lag reports the wall clock minus the timestamp of the newest entry emitted.
	Lag(query string, d time.Duration)
	// ReadLimit counts answers over MaxResponseBytes; reader is "response"
	// (query_range, asked again in smaller pages) or "tail" (a tail message).
	ReadLimit(query, reader string)
	// Refused reports whether Loki refuses the query's current LogQL (400).
	Refused(query string, refused bool)
	// ClockClamped counts lines dated by the controller's clock instead of their
	// timestamp; direction is "ahead" (from the future) or "behind" (from the tail,
	// older than ClockTolerance).
	ClockClamped(query, direction string, n int)
	// EarlierBoot counts lines skipped because they come from an earlier boot of
	// their node than its current one.
	EarlierBoot(query string, n int)
	// CatchUpShrink counts catch-up pages Loki did not answer in time, each asked
	// again for a shorter window and a smaller page; reason is "timeout", "eof" or
	// "status" (a 504 or a 5xx that timed out).
	CatchUpShrink(query, reason string)
	// CatchUpSize reports the window and page a catch-up asks for after it changed.
	CatchUpSize(query string, window time.Duration, limit int)
	// PollInterval reports the interval of the poll while tailing after it changed.
	PollInterval(query string, d time.Duration)
	// MissedByTail counts lines the tail should have delivered and did not (a poll
	// found them older than the tail's slack, or read them first and the tail did
	// not deliver them within it): Loki's tail dropping lines without reporting them.
	MissedByTail(query string, n int)
	// AuditReads counts the seconds of lines an audit read again because Loki held
	// more of their lines than were read (or did not count them).
	AuditReads(query string, n int)
}

type nopMetrics struct{}

func (nopMetrics) Lines(string, int)                      {}
func (nopMetrics) Duplicates(string, int)                 {}
func (nopMetrics) DroppedEntries(string, int)             {}
func (nopMetrics) Reconnect(string, string)               {}
func (nopMetrics) Lag(string, time.Duration)              {}
func (nopMetrics) ReadLimit(string, string)               {}
func (nopMetrics) Refused(string, bool)                   {}
func (nopMetrics) ClockClamped(string, string, int)       {}
func (nopMetrics) EarlierBoot(string, int)                {}
func (nopMetrics) CatchUpShrink(string, string)           {}
func (nopMetrics) CatchUpSize(string, time.Duration, int) {}
func (nopMetrics) PollInterval(string, time.Duration)     {}
func (nopMetrics) MissedByTail(string, int)               {}
func (nopMetrics) AuditReads(string, int)                 {}

// PrometheusMetrics implements Metrics with Prometheus collectors.
type PrometheusMetrics struct {
	lines, duplicates, dropped *prometheus.CounterVec
	reconnects                 *prometheus.CounterVec
	lag                        *prometheus.GaugeVec
	readLimit, refusals        *prometheus.CounterVec
	refused                    *prometheus.GaugeVec
	clamped, earlierBoot       *prometheus.CounterVec
	shrinks                    *prometheus.CounterVec
	window, pageLimit, poll    *prometheus.GaugeVec
	missed, auditReads         *prometheus.CounterVec
}

// NewPrometheusMetrics creates the collectors and registers them with reg (if not nil).
func NewPrometheusMetrics(reg prometheus.Registerer) *PrometheusMetrics {
	m := &PrometheusMetrics{
		lines:       newCounterVec("faultline_loki_lines_total", "Candidate log lines read from Loki and emitted, by query.", "query"),
		duplicates:  newCounterVec("faultline_loki_duplicates_total", "Lines read again from Loki (overlapping reads) and skipped, by query.", "query"),
		dropped:     newCounterVec("faultline_loki_tail_dropped_entries_total", "Entries Loki's tail reported as dropped (then read with query_range), by query.", "query"),
		reconnects:  newCounterVec("faultline_loki_reconnects_total", "Catch-up and tail cycles restarted, by query and reason (error, closed, dropped, read_limit).", "query", "reason"),
		lag:         newGaugeVec("faultline_loki_lag_seconds", "Wall clock minus the timestamp of the newest line emitted, by query.", "query"),
		readLimit:   newCounterVec("faultline_loki_read_limit_total", "Loki answers over the response size limit, by query and reader (response: asked again in smaller pages; tail: the tail restarts).", "query", "reader"),
		refusals:    newCounterVec("faultline_loki_query_refusals_total", "Queries Loki refused (400 Bad Request), by query.", "query"),
		refused:     newGaugeVec("faultline_loki_query_refused", "1 while Loki refuses the query's current LogQL (the last accepted one runs instead, if any), by query.", "query"),
		clamped:     newCounterVec("faultline_loki_clock_clamped_lines_total", "Lines dated by the controller's clock because their timestamp was ahead of it or (tail) too far behind, by query and direction.", "query", "direction"),
		earlierBoot: newCounterVec("faultline_loki_earlier_boot_lines_total", "Lines skipped because they come from an earlier boot of their node than the current one, by query.", "query"),
		shrinks:     newCounterVec("faultline_loki_catchup_shrinks_total", "Catch-up pages Loki did not answer in time, asked again for a shorter window and a smaller page, by query and reason (timeout, eof, status).", "query", "reason"),
		window:      newGaugeVec("faultline_loki_catchup_window_seconds", "Longest time window a catch-up asks for (shorter for a while after Loki answered too slowly), by query.", "query"),
		pageLimit:   newGaugeVec("faultline_loki_catchup_page_limit", "Lines per page a catch-up asks for (fewer for a while after Loki answered too slowly), by query.", "query"),
		poll:        newGaugeVec("faultline_loki_poll_interval_seconds", "Interval of the query_range poll while tailing (longer while polls only re-read what the tail delivered), by query.", "query"),
		missed:      newCounterVec("faultline_loki_tail_missed_lines_total", "Lines Loki's tail should have delivered and did not, read by the poll instead (the tail drops lines under load without reporting them), by query.", "query"),
		auditReads:  newCounterVec("faultline_loki_audit_rereads_total", "Seconds of lines read again because Loki counted more lines in them than were read (lines that reached Loki late and that the tail dropped) or did not count them, by query.", "query"),
	}
	if reg != nil {
		reg.MustRegister(m.lines, m.duplicates, m.dropped, m.reconnects, m.lag, m.readLimit, m.refusals, m.refused, m.clamped, m.earlierBoot,
			m.shrinks, m.window, m.pageLimit, m.poll, m.missed, m.auditReads)
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

// ReadLimit implements Metrics.
func (m *PrometheusMetrics) ReadLimit(q, reader string) { m.readLimit.WithLabelValues(q, reader).Inc() }

// Refused implements Metrics.
func (m *PrometheusMetrics) Refused(q string, refused bool) {
	if refused {
		m.refusals.WithLabelValues(q).Inc()
		m.refused.WithLabelValues(q).Set(1)
		return
	}
	m.refused.WithLabelValues(q).Set(0)
}

// ClockClamped implements Metrics.
func (m *PrometheusMetrics) ClockClamped(q, direction string, n int) {
	m.clamped.WithLabelValues(q, direction).Add(float64(n))
}

// EarlierBoot implements Metrics.
func (m *PrometheusMetrics) EarlierBoot(q string, n int) {
	m.earlierBoot.WithLabelValues(q).Add(float64(n))
}

// CatchUpShrink implements Metrics.
func (m *PrometheusMetrics) CatchUpShrink(q, reason string) {
	m.shrinks.WithLabelValues(q, reason).Inc()
}

// CatchUpSize implements Metrics.
func (m *PrometheusMetrics) CatchUpSize(q string, window time.Duration, limit int) {
	m.window.WithLabelValues(q).Set(window.Seconds())
	m.pageLimit.WithLabelValues(q).Set(float64(limit))
}

// PollInterval implements Metrics.
func (m *PrometheusMetrics) PollInterval(q string, d time.Duration) {
	m.poll.WithLabelValues(q).Set(d.Seconds())
}

// MissedByTail implements Metrics.
func (m *PrometheusMetrics) MissedByTail(q string, n int) {
	m.missed.WithLabelValues(q).Add(float64(n))
}

// AuditReads implements Metrics.
func (m *PrometheusMetrics) AuditReads(q string, n int) {
	m.auditReads.WithLabelValues(q).Add(float64(n))
}

// newCounterVec and newGaugeVec declare a metric by its name, help and labels.
func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

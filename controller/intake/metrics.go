package intake

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/logstream"
)

// Metrics counts what the intake receives.
type Metrics struct {
	// Requests by status code.
	Requests *prometheus.CounterVec
	// Lines accepted and handed to the leader, by source.
	Lines *prometheus.CounterVec
	// Skipped records, by reason (Skip*): counted, never silently dropped.
	Skipped *prometheus.CounterVec
	// Malformed requests, by what was wrong.
	Malformed *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_intake_requests_total",
			Help: "OTLP log requests pushed to the controller's intake, by HTTP status code (503: this replica does not lead; the collector retries)."}, []string{"code"}),
		Lines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_intake_lines_total",
			Help: "Lines the intake accepted and handed to the leader's pipeline, by source (lines Loki's reading already delivered are then skipped there, see faultline_controller_duplicate_lines_total)."}, []string{"source"}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_intake_records_skipped_total",
			Help: "Pushed log records that are not lines the controller reads, by reason: no_node, no_text, source_not_read (Loki's reading still sees them where a selector selects them)."}, []string{"reason"}),
		Malformed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_intake_malformed_requests_total",
			Help: "Pushed requests refused because their body is not an OTLP logs request."}, []string{"what"}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Lines, m.Skipped, m.Malformed)
	}
	return m
}

func (m *Metrics) count(lines []logstream.Line, skipped map[string]int) {
	for _, l := range lines {
		m.Lines.WithLabelValues(l.Source).Inc()
	}
	for reason, n := range skipped {
		m.Skipped.WithLabelValues(reason).Add(float64(n))
	}
}

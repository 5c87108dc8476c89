package probe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the probes' Prometheus metrics (see the package documentation).
type Metrics struct {
	duration *prometheus.GaugeVec
	success  *prometheus.GaugeVec
	result   *prometheus.GaugeVec
	value    *prometheus.GaugeVec
	runs     *prometheus.CounterVec
	lastRun  *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_probe_duration_seconds",
			Help: "Duration of the last run of a probe."}, []string{"check"}),
		success: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_probe_success",
			Help: "1 if the last run of a probe reached a verdict (pass, warn or fail), 0 if it could not run or was skipped."}, []string{"check"}),
		result: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_probe_result",
			Help: "Verdict of the last run: 1 pass, 0.5 warn, 0 fail; device=\"\" is the whole check. Absent after an error or a skip."},
			[]string{"node", "check", "device"}),
		value: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_probe_value",
			Help: "Values measured by the last run of a probe (h2d_gbps, dgemm_tflops, loss_pct, ...); device=\"\" is node-level."},
			[]string{"node", "check", "device", "metric"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_probe_runs_total",
			Help: "Probe runs by status (pass, warn, fail, error, skipped)."}, []string{"check", "status"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_probe_last_run_timestamp_seconds",
			Help: "Unix time at which the last run of a probe ended."}, []string{"check"}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.success, m.result, m.value, m.runs, m.lastRun)
	}
	return m
}

// Observe records a finished run. The previous run's result and value series of the
// same node and check are removed first, so a GPU that vanished does not keep its old
// verdict.
func (m *Metrics) Observe(r Result) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(r.Check).Set(r.Duration.Seconds())
	ok := 0.0
	if r.Status == StatusPass || r.Status == StatusWarn || r.Status == StatusFail {
		ok = 1
	}
	m.success.WithLabelValues(r.Check).Set(ok)
	m.runs.WithLabelValues(r.Check, string(r.Status)).Inc()
	m.lastRun.WithLabelValues(r.Check).Set(float64(r.Started.Add(r.Duration).UnixNano()) / 1e9)

	scope := prometheus.Labels{"node": r.Node, "check": r.Check}
	m.result.DeletePartialMatch(scope)
	m.value.DeletePartialMatch(scope)
	if v, ok := ResultValue(r.Status); ok {
		m.result.WithLabelValues(r.Node, r.Check, "").Set(v)
	}
	for metric, v := range r.Values {
		m.value.WithLabelValues(r.Node, r.Check, "", metric).Set(v)
	}
	for _, d := range r.Devices {
		if v, ok := ResultValue(d.Status); ok {
			m.result.WithLabelValues(r.Node, r.Check, d.ID).Set(v)
		}
		for metric, v := range d.Values {
			m.value.WithLabelValues(r.Node, r.Check, d.ID, metric).Set(v)
		}
	}
}

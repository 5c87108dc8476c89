package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the exporter's Prometheus metrics.
type Metrics struct {
	read           *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	shipped        *prometheus.CounterVec
	failed         prometheus.Counter
	retries        prometheus.Counter
	batchLatency   prometheus.Histogram
	bufferFill     prometheus.Gauge
	bufferCapacity prometheus.Gauge
	lastSeq        prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		read: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_exporter_records_read_total", Help: "Log records read, by source (kernel, pod).",
		}, []string{"source"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_exporter_records_dropped_total",
			Help: "Records lost before shipping, by reason: overrun (kernel ring buffer overwrote them), malformed, truncated.",
		}, []string{"reason"}),
		shipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_exporter_records_shipped_total", Help: "Records acknowledged by the receiver, by source.",
		}, []string{"source"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faultline_exporter_records_failed_total", Help: "Records the receiver refused for good (4xx other than 429).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faultline_exporter_send_retries_total", Help: "Send attempts retried after a network error, 429 or 5xx.",
		}),
		batchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "faultline_exporter_batch_duration_seconds", Help: "Time to ship one batch, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		bufferFill: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "faultline_exporter_buffer_records", Help: "Records waiting in the buffer between readers and sender.",
		}),
		bufferCapacity: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "faultline_exporter_buffer_capacity", Help: "Capacity of the buffer; readers wait when it is full.",
		}),
		lastSeq: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "faultline_exporter_last_shipped_seq", Help: "Sequence number of the last acknowledged kernel record.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.read, m.dropped, m.shipped, m.failed, m.retries, m.batchLatency, m.bufferFill, m.bufferCapacity, m.lastSeq)
	}
	return m
}

// CountRead counts a record read by a pod source.
func (m *Metrics) CountRead(source string) { m.read.WithLabelValues(source).Inc() }

// CountDropped counts records lost for a reason.
func (m *Metrics) CountDropped(reason string, n int) {
	m.dropped.WithLabelValues(reason).Add(float64(n))
}

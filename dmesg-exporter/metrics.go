package exporter

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/dmesg-exporter/podlogs"
)

// Metrics are the exporter's Prometheus metrics.
type Metrics struct {
	read           *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	shipped        *prometheus.CounterVec
	refusals       *prometheus.CounterVec
	refusing       *prometheus.GaugeVec
	splits         *prometheus.CounterVec
	cut            *prometheus.CounterVec
	retries        *prometheus.CounterVec
	batchLatency   prometheus.Histogram
	bufferFill     *prometheus.GaugeVec
	bufferCapacity *prometheus.GaugeVec
	bufferBytes    *prometheus.GaugeVec
	bufferBytesCap *prometheus.GaugeVec
	lastSeq        prometheus.Gauge
	// pods is the pod log tailer whose counters the pod file metrics read.
	pods atomic.Pointer[podlogs.Tailer]
}

// podStats reads the pod tailer's counters (zero without pod logs).
func (m *Metrics) podStats() podlogs.Stats {
	if t := m.pods.Load(); t != nil {
		return t.Stats()
	}
	return podlogs.Stats{}
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		read:     newCounterVec("faultline_exporter_records_read_total", "Log records read, by source (kernel, pod).", "source"),
		dropped:  newCounterVec("faultline_exporter_records_dropped_total", "Records lost or cut before shipping, by reason: overrun (kernel ring buffer overwrote them), malformed, truncated (pod line over the line size cap), too_large (one record the receiver refused for its size even when cut short), too_old (older than the maximum age, which Loki refuses).", "reason"),
		shipped:  newCounterVec("faultline_exporter_records_shipped_total", "Records acknowledged by the receiver, by source.", "source"),
		refusals: newCounterVec("faultline_exporter_send_refusals_total", "Requests the receiver refused (4xx other than 429, rejected records, encoding errors), by source and code; a refused batch is split (413) or retried, never dropped.", "source", "code"),
		refusing: newGaugeVec("faultline_exporter_receiver_refusing", "1 while the receiver refuses a batch of this source that cannot be split further (the source's position does not move; /healthz fails).", "source"),
		splits:   newCounterVec("faultline_exporter_batch_splits_total", "Batches split in two after the receiver answered 413, by source.", "source"),
		cut:      newCounterVec("faultline_exporter_records_cut_for_receiver_total", "Single records cut short (with a truncation mark) because the receiver refused them for their size, by source.", "source"),
		retries:  newCounterVec("faultline_exporter_send_retries_total", "Send attempts retried after a network error, a 429, a 5xx or a refusal, by source.", "source"),
		batchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "faultline_exporter_batch_duration_seconds", Help: "Time to ship one batch, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		bufferFill:     newGaugeVec("faultline_exporter_buffer_records", "Records waiting in a source's buffer between its reader and its sender.", "source"),
		bufferCapacity: newGaugeVec("faultline_exporter_buffer_capacity", "Records a source's buffer holds; its reader waits when it is full.", "source"),
		bufferBytes:    newGaugeVec("faultline_exporter_buffer_bytes", "Bytes of records read and not yet acknowledged, by source (buffer and batch in flight).", "source"),
		bufferBytesCap: newGaugeVec("faultline_exporter_buffer_bytes_capacity", "Bytes a source may hold read and unacknowledged; its reader waits beyond.", "source"),
		lastSeq: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "faultline_exporter_last_shipped_seq", Help: "Sequence number of the last acknowledged kernel record.",
		}),
	}
	podCounter := func(name, help string, v func(podlogs.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(m.podStats())) })
	}
	if reg != nil {
		reg.MustRegister(m.read, m.dropped, m.shipped, m.refusals, m.refusing, m.splits, m.cut, m.retries, m.batchLatency,
			m.bufferFill, m.bufferCapacity, m.bufferBytes, m.bufferBytesCap, m.lastSeq,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "faultline_exporter_pod_files", Help: "Pod log files tailed."},
				func() float64 { return float64(m.podStats().Files) }),
			podCounter("faultline_exporter_pod_bytes_read_total", "Bytes read from pod log files.",
				func(s podlogs.Stats) uint64 { return s.Bytes }),
			podCounter("faultline_exporter_pod_lines_malformed_total", "Pod log lines not in CRI format, skipped.",
				func(s podlogs.Stats) uint64 { return s.Malformed }),
			podCounter("faultline_exporter_pod_rotations_total", "Pod log files replaced under their path (kubelet rotation).",
				func(s podlogs.Stats) uint64 { return s.Rotations }),
			podCounter("faultline_exporter_pod_truncations_total", "Pod log files that shrank below the read position (copytruncate), read again from the start.",
				func(s podlogs.Stats) uint64 { return s.Truncations }),
			podCounter("faultline_exporter_pod_tails_lost_total", "Pod log files rotated away (and compressed) while the exporter was stopped: the rest of the file was lost.",
				func(s podlogs.Stats) uint64 { return s.Unrecovered }),
			podCounter("faultline_exporter_pod_read_errors_total", "Failures to list, open, stat or read pod log files.",
				func(s podlogs.Stats) uint64 { return s.Errors }),
		)
	}
	return m
}

// newCounterVec and newGaugeVec declare a metric by its name, help and labels.
func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

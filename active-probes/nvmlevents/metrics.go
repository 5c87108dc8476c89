package nvmlevents

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what the watcher read and what it could not watch.
type Metrics struct {
	events      *prometheus.CounterVec
	coalesced   *prometheus.CounterVec
	unsupported *prometheus.GaugeVec
	lost        prometheus.Counter
	errors      *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_nvml_events_total", Help: "GPU events read from NVML, by type (xid, dbe, sbe, clock, power_source, sbe_storm, dram_retirement, dram_retirement_failure, poison, fatal_poison, gpu_unavailable, recovery_action), each shipped as one line with source=\"nvml\" but those counted in faultline_nvml_events_coalesced_total.",
		}, []string{"type"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_nvml_events_coalesced_total", Help: "NVML events not shipped as a line because the same GPU shipped a line of the type less than the interval before (clock changes: --nvml-clock-interval), by type.",
		}, []string{"type"}),
		unsupported: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "faultline_nvml_event_types_unsupported", Help: "GPUs on which NVML does not support an event type (NVML_ERROR_NOT_SUPPORTED), by type: those events cannot be seen there.",
		}, []string{"type"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faultline_nvml_gpus_lost_total", Help: "GPUs NVML reported lost (NVML_ERROR_GPU_IS_LOST), each reported once as a line.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faultline_nvml_event_errors_total", Help: "NVML calls of the event watcher that failed otherwise, by call.",
		}, []string{"call"}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.coalesced, m.unsupported, m.lost, m.errors)
	}
	return m
}

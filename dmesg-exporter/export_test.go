package exporter

import "github.com/prometheus/client_golang/prometheus"

// Metric series for tests, read with prometheus/testutil.

func (m *Metrics) Refusals(source, code string) prometheus.Collector {
	return m.refusals.WithLabelValues(source, code)
}
func (m *Metrics) Refusing(source string) prometheus.Collector {
	return m.refusing.WithLabelValues(source)
}
func (m *Metrics) Splits(source string) prometheus.Collector { return m.splits.WithLabelValues(source) }
func (m *Metrics) Cut(source string) prometheus.Collector    { return m.cut.WithLabelValues(source) }
func (m *Metrics) Dropped(reason string) prometheus.Collector {
	return m.dropped.WithLabelValues(reason)
}
func (m *Metrics) Shipped(source string) prometheus.Collector {
	return m.shipped.WithLabelValues(source)
}

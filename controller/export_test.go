package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// The controller's collectors, for the tests to read with prometheus testutil.

func (m *Metrics) LinesRead() *prometheus.CounterVec    { return m.lines }
func (m *Metrics) Decisions() *prometheus.CounterVec    { return m.decisions }
func (m *Metrics) Held() *prometheus.GaugeVec           { return m.held }
func (m *Metrics) Storms() *prometheus.GaugeVec         { return m.storms }
func (m *Metrics) BudgetLeft() prometheus.Gauge         { return m.budgetLeft }
func (m *Metrics) Leader() prometheus.Gauge             { return m.leader }
func (m *Metrics) EligibleNodes() prometheus.Gauge      { return m.eligibleNodes }
func (m *Metrics) Reloads() prometheus.Counter          { return m.reloads }
func (m *Metrics) ReloadErrors() prometheus.Counter     { return m.reloadErrors }
func (m *Metrics) ProbeResults() *prometheus.CounterVec { return m.probeResults }
func (m *Metrics) ProbeSkipped() *prometheus.CounterVec { return m.probeSkipped }
func (m *Metrics) DeepSkipped() *prometheus.CounterVec  { return m.deepSkipped }
func (m *Metrics) OtherShard() prometheus.Counter       { return m.otherShard }
func (m *Metrics) ShardMoves() *prometheus.CounterVec   { return m.shardMoves }
func (m *Metrics) FleetFaults() *prometheus.GaugeVec    { return m.fleetFaults }
func (m *Metrics) DecisionDelay() prometheus.Histogram  { return m.decideDelay }
func (m *Metrics) CarryTime() *prometheus.HistogramVec  { return m.carryTime }
func (m *Metrics) FenceTime() *prometheus.HistogramVec  { return m.fenceTime }
func (m *Metrics) WarmLines() *prometheus.CounterVec    { return m.warmLines }
func (m *Metrics) PodEvents() *prometheus.CounterVec    { return m.podEvents }

// Records is the collector of the NodeFault gauges; SetRecords names their source.
func (m *Metrics) Records() prometheus.Collector                { return m.records }
func (m *Metrics) SetRecords(list func() []*v1alpha1.NodeFault) { m.setRecords(list) }

func (m *Metrics) DuplicateLines() *prometheus.CounterVec { return m.duplicateLines }

// Leading reports whether this replica currently runs the pipeline: the tests wait
// for a leader with it, where the product reads c.leading itself.
func (c *Controller) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

package controller

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/lokisource"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	lines            *prometheus.CounterVec
	noNode           prometheus.Counter
	otherShard       prometheus.Counter
	duplicateLines   *prometheus.CounterVec
	warmLines        *prometheus.CounterVec
	shardMoves       *prometheus.CounterVec
	matches          *prometheus.CounterVec
	decisions        *prometheus.CounterVec
	decideDelay      prometheus.Histogram
	carryTime        *prometheus.HistogramVec
	fenceTime        *prometheus.HistogramVec
	taintedNodes     prometheus.Gauge
	budgetLeft       prometheus.Gauge
	eligibleNodes    prometheus.Gauge
	held             *prometheus.GaugeVec
	storms           *prometheus.GaugeVec
	fleetFaults      *prometheus.GaugeVec
	packRules        prometheus.Gauge
	reloads          prometheus.Counter
	reloadErrors     prometheus.Counter
	checkpointErrors prometheus.Counter
	recordErrors     prometheus.Counter
	phaseRefused     *prometheus.CounterVec
	leader           prometheus.Gauge
	probeResults     *prometheus.CounterVec
	probeSkipped     *prometheus.CounterVec
	deepSkipped      *prometheus.CounterVec
	podEvents        *prometheus.CounterVec
	requests         *prometheus.CounterVec
	loki             *lokisource.PrometheusMetrics
	records          *recordsCollector
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_lines_total",
			Help: "Log lines read from Loki, by query (kernel, pod)."}, []string{"query"}),
		noNode: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_lines_without_node_total",
			Help: "Lines whose stream has no node label: counted and skipped."}),
		duplicateLines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_duplicate_lines_total",
			Help: "Lines skipped because the other path delivered them first, by the path that delivered them second: loki (read from Loki after the collector pushed them, the usual case) or intake (pushed after Loki's reading delivered them)."}, []string{"path"}),
		otherShard: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_lines_other_shard_total",
			Help: "Lines of nodes outside this controller's shard (--shard-label): skipped, that shard decides them."}),
		warmLines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_warmup_lines_total",
			Help: "Lines read again before a saved read position when a term starts, to fill the rules' windows (not decided again), by result (ok, error, too_many_lines)."}, []string{"result"}),
		shardMoves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_shard_moves_total",
			Help: "Nodes that joined or left this controller's shard (relabelled, created, deleted), by direction."}, []string{"direction"}),
		matches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_matches_total",
			Help: "Lines matched, by rule (pack/id) and severity, whether or not the rule fired."}, []string{"rule", "severity"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_decisions_total",
			Help: "Decisions by action (taint, event, probe, annotate, observe, hold-<reason>, dry-run-<action>, untaint, ...), result and the mode the rule acted in (observe, annotate, enforce)."},
			[]string{"action", "result", "mode"}),
		// line → taint in two parts, to tell a slow read from slow API writes.
		decideDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "faultline_controller_decision_delay_seconds",
			Help:    "From a fault's line (its node's clock, bounded by the controller's) to its decision: Loki's delivery and the controller's reading.",
			Buckets: latencyBuckets}),
		carryTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "faultline_controller_carry_seconds",
			Help:    "From a decision to its end, waiting for a worker included, by action (taint: the taint, its record and Event written).",
			Buckets: latencyBuckets}, []string{"action"}),
		// Its first part alone: a burst's books wait for its fences (docs/controller.md).
		fenceTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "faultline_controller_fence_seconds",
			Help:    "From a decision to the end of its first part, waiting for a worker included, by action (taint: its record Placing and the Node written).",
			Buckets: latencyBuckets}, []string{"action"}),
		taintedNodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_taints_active",
			Help: "Nodes carrying a taint faultline placed."}),
		budgetLeft: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_budget_left",
			Help: "Nodes faultline may still taint under the global budget."}),
		eligibleNodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_eligible_nodes",
			Help: "Nodes in the budget's and the storm hold's population: matching the eligible-node selector, not opted out."}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_controller_held_faults",
			Help: "Faults held instead of applied, by reason (budget, rule-budget, storm, opted-out, fleet, group-budget)."}, []string{"reason"}),
		storms: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_controller_storms",
			Help: "1 for each rule whose storm hold holds its faults now (not released), by rule (pack/rule); its held faults are the NodeFaults in phase Held with reason storm."}, []string{"rule"}),
		fleetFaults: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_controller_fleet_faults",
			Help: "Fleet faults waiting for an operator's verdict, by topology label and rule family (pack)."}, []string{"label", "family"}),
		packRules: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_rules_loaded",
			Help: "Enabled rules in the active pack set."}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_pack_reloads_total",
			Help: "Successful rule pack (re)loads."}),
		reloadErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_pack_reload_errors_total",
			Help: "Rule pack reloads rejected; the last good set stayed active."}),
		checkpointErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_checkpoint_errors_total",
			Help: "Failed saves of the read position."}),
		recordErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_nodefault_errors_total",
			Help: "Failed writes of NodeFault records (the decision itself was carried out)."}),
		phaseRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_nodefault_transitions_refused_total",
			Help: "NodeFault writes refused because their change of phase is not an allowed transition (docs/lifecycle.md), by from, to and cause; also counted in ..._nodefault_errors_total."},
			[]string{"from", "to", "cause"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_leader",
			Help: "1 while this replica leads."}),
		probeResults: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_probe_results_total",
			Help: "Probe results received from agents (and the controller's own checks), by check, status and trigger (manual, schedule, rule, recovery, escalation)."},
			[]string{"check", "status", "trigger"}),
		probeSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_probe_runs_skipped_total",
			Help: "Scheduled probe rounds skipped because the previous round of the check was still running."}, []string{"check"}),
		deepSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_deep_checks_skipped_total",
			Help: "Nodes the periodic deep checks (--autopilot-compat) passed over, by reason: gpus-busy (the agent refused: containers hold the GPUs, or another invasive check runs), running (the node's previous deep checks still run)."},
			[]string{"reason"}),
		podEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_pod_events_total",
			Help: "Warning Events on the pods that held a faulty node's GPUs when its fault was recorded, by result (posted; dropped past the rate bound; failed)."}, []string{"result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_requests_total",
			Help: "Operators' requests on faults (NodeFault spec.request) answered, by action (Resolve, Release, Dismiss, ReleaseStorm) and result (Done, Refused)."}, []string{"action", "result"}),
		loki:    lokisource.NewPrometheusMetrics(reg),
		records: &recordsCollector{},
	}
	if reg != nil {
		reg.MustRegister(m.lines, m.noNode, m.otherShard, m.duplicateLines, m.warmLines, m.shardMoves, m.matches, m.decisions, m.decideDelay, m.carryTime, m.fenceTime, m.taintedNodes, m.budgetLeft, m.eligibleNodes, m.held, m.storms, m.fleetFaults,
			m.packRules, m.reloads, m.reloadErrors, m.checkpointErrors, m.recordErrors, m.phaseRefused, m.leader, m.probeResults, m.probeSkipped, m.deepSkipped, m.podEvents, m.requests, m.records)
	}
	return m
}

// latencyBuckets span a line → taint path from tens of milliseconds to a reader or
// writer minutes behind.
var latencyBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

var (
	faultsDesc = prometheus.NewDesc("faultline_controller_faults",
		"NodeFault records by scope (Node, Fleet), phase and the mode the rule last acted in, from the controller's informer cache.",
		[]string{"scope", "phase", "mode"}, nil)
	stepsDesc = prometheus.NewDesc("faultline_controller_escalation_steps",
		"Faults past the first rung of their rule's escalation ladder, by the action and state of the last step reached, from the controller's informer cache (resolved faults excluded).",
		[]string{"action", "state"}, nil)
)

// recordsCollector counts the NodeFault records at each scrape, so the gauges are
// what the apiserver holds (every replica's cache), not what one replica decided.
type recordsCollector struct {
	list atomic.Pointer[func() []*v1alpha1.NodeFault]
}

// setRecords names where the records come from (the actor's cache), once it exists.
func (m *Metrics) setRecords(list func() []*v1alpha1.NodeFault) { m.records.list.Store(&list) }

func (c *recordsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- faultsDesc
	ch <- stepsDesc
}

func (c *recordsCollector) Collect(ch chan<- prometheus.Metric) {
	list := c.list.Load()
	if list == nil {
		return
	}
	type fkey struct{ scope, phase, mode string }
	type skey struct{ action, state string }
	faults, steps := map[fkey]int{}, map[skey]int{}
	for _, nf := range (*list)() {
		scope := string(nf.Spec.Scope)
		if scope == "" {
			scope = string(v1alpha1.ScopeNode)
		}
		faults[fkey{scope, string(nf.Status.Phase), nf.Status.Mode}]++
		if e := nf.Status.Escalation; e != nil && e.Step > 0 && nf.Status.Phase != v1alpha1.PhaseResolved {
			steps[skey{e.Action, string(e.State)}]++
		}
	}
	for k, n := range faults {
		ch <- prometheus.MustNewConstMetric(faultsDesc, prometheus.GaugeValue, float64(n), k.scope, k.phase, k.mode)
	}
	for k, n := range steps {
		ch <- prometheus.MustNewConstMetric(stepsDesc, prometheus.GaugeValue, float64(n), k.action, k.state)
	}
}

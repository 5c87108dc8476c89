package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/controller/lokisource"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	lines            *prometheus.CounterVec
	noNode           prometheus.Counter
	otherShard       prometheus.Counter
	shardMoves       *prometheus.CounterVec
	matches          *prometheus.CounterVec
	decisions        *prometheus.CounterVec
	taintedNodes     prometheus.Gauge
	budgetLeft       prometheus.Gauge
	eligibleNodes    prometheus.Gauge
	held             *prometheus.GaugeVec
	fleetFaults      *prometheus.GaugeVec
	packRules        prometheus.Gauge
	reloads          prometheus.Counter
	reloadErrors     prometheus.Counter
	checkpointErrors prometheus.Counter
	recordErrors     prometheus.Counter
	leader           prometheus.Gauge
	probeResults     *prometheus.CounterVec
	probeSkipped     *prometheus.CounterVec
	loki             *lokisource.PrometheusMetrics
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_lines_total",
			Help: "Log lines read from Loki, by query (kernel, pod)."}, []string{"query"}),
		noNode: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_lines_without_node_total",
			Help: "Lines whose stream has no node label: counted and skipped."}),
		otherShard: prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_lines_other_shard_total",
			Help: "Lines of nodes outside this controller's shard (--shard-label): skipped, that shard decides them."}),
		shardMoves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_shard_moves_total",
			Help: "Nodes that joined or left this controller's shard (relabelled, created, deleted), by direction."}, []string{"direction"}),
		matches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_matches_total",
			Help: "Lines matched, by rule (pack/id) and severity, whether or not the rule fired."}, []string{"rule", "severity"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_decisions_total",
			Help: "Decisions by action (taint, event, probe, annotate, observe, hold-<reason>, dry-run-<action>, untaint, ...), result and the mode the rule acted in (observe, annotate, enforce)."},
			[]string{"action", "result", "mode"}),
		taintedNodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_taints_active",
			Help: "Nodes carrying a taint faultline placed."}),
		budgetLeft: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_budget_left",
			Help: "Nodes faultline may still taint under the global budget."}),
		eligibleNodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_eligible_nodes",
			Help: "Nodes in the budget's and the storm hold's population: matching the eligible-node selector, not opted out."}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faultline_controller_held_faults",
			Help: "Faults held instead of applied, by reason (budget, rule-budget, storm, opted-out, fleet, group-budget)."}, []string{"reason"}),
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
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "faultline_controller_leader",
			Help: "1 while this replica leads."}),
		probeResults: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_probe_results_total",
			Help: "Probe results received from agents (and the controller's own checks), by check, status and trigger (manual, schedule, rule, recovery, escalation)."},
			[]string{"check", "status", "trigger"}),
		probeSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_probe_runs_skipped_total",
			Help: "Scheduled probe rounds skipped because the previous round of the check was still running."}, []string{"check"}),
		loki: lokisource.NewPrometheusMetrics(reg),
	}
	if reg != nil {
		reg.MustRegister(m.lines, m.noNode, m.otherShard, m.shardMoves, m.matches, m.decisions, m.taintedNodes, m.budgetLeft, m.eligibleNodes, m.held, m.fleetFaults,
			m.packRules, m.reloads, m.reloadErrors, m.checkpointErrors, m.recordErrors, m.leader, m.probeResults, m.probeSkipped)
	}
	return m
}

// Package trigger starts the controller's probe runs, beside the line pipeline: by
// hand (the HTTP API and `faultline probe run`), on a schedule, to confirm a rule's
// match before a taint, and before a recovery untaint. It reports each node's results
// (metrics, log lines, Events, the faultline.io/health label) and hands probe
// verdicts back to the decide stage.
package trigger

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/autopilot"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/logstream"
)

// LabelHealth is the node label with the latest probe verdict.
const LabelHealth = "faultline.io/health"

// Values of LabelHealth, in precedence order: TESTING while probes run on the node,
// else the worst latest result over the checks that ran there: FAIL (a check
// failed), WARN (a check warned or could not reach a verdict), PASS.
const (
	HealthTesting = "TESTING"
	HealthFail    = "FAIL"
	HealthWarn    = "WARN"
	HealthPass    = "PASS"
)

// Config configures the controller's probe triggers. With no agents (no Agents, no
// AgentURLs), probes are off: a rule with action probe then applies its
// onTimeout policy.
type Config struct {
	// Agents finds the agents in the cluster (proberun.AgentPods: the Running and
	// Ready agent pod of each node); AgentURLs fixes the URL of some nodes' agents
	// (local setups) and comes first.
	Agents    proberun.Resolver
	AgentURLs map[string]string
	// HTTP calls the agents (proberun.AgentClient: TLS verified against their CA).
	HTTP  *http.Client
	Token func() (string, error)
	// Registry lists every check and where it runs (default: the node checks);
	// Local runs those that run in the controller (pvc).
	Registry *probe.Registry
	Local    *probe.Runner
	// Schedules: checks run on every selected node at an interval, never overlapping.
	Schedules []Schedule
	// NodeSelector picks the nodes scheduled probes run on (empty: all).
	NodeSelector labels.Selector
	// ConfirmTimeout bounds the probes a rule asks for (default 15m); RecoverEvery is
	// how often a tainted node's recovery probes are retried (default 10m); IdleEvery
	// how often invasive checks refused while pods hold the node's GPUs are asked
	// for again, confirming or recovery ones (default 1m).
	ConfirmTimeout time.Duration
	RecoverEvery   time.Duration
	IdleEvery      time.Duration
	// NoHealthLabel leaves the faultline.io/health label alone.
	NoHealthLabel bool
	// Batch, NodeTimeout: see proberun.Config.
	Batch       int
	NodeTimeout time.Duration
	// Autopilot turns on the compatibility with IBM Autopilot (nil: off): its check
	// names, its node labels and its periodic deep checks (autopilot.go).
	Autopilot *Autopilot
}

// Schedule runs a check periodically.
type Schedule struct {
	Check  string
	Every  time.Duration
	Params probe.Params
}

// probeState is what the controller remembers about probes.
type probeState struct {
	mu         sync.Mutex
	latest     map[string]map[string]probe.Status // node → check → latest status
	confirming map[string]context.Context         // fault keys with a confirmation in flight → its term's context
	recovering map[string]time.Time               // fault ID on node → when its recovery run started
	passed     map[string]time.Time               // fault ID on node → when its recovery probes passed
}

func newProbeState() *probeState {
	return &probeState{latest: map[string]map[string]probe.Status{}, confirming: map[string]context.Context{},
		recovering: map[string]time.Time{}, passed: map[string]time.Time{}}
}

// Actor is what the triggers need of the act stage (*act.Actor).
type Actor interface {
	Nodes() act.NodeCache
	Event(ctx context.Context, node string, f fault.Fault, reason, message string) error
	SetNodeMeta(ctx context.Context, node string, labels, annotations map[string]string) (bool, error)
}

// Deps connect the triggers to the rest of the controller.
type Deps struct {
	Actor   Actor
	Decider *decide.Decider
	// Facts reads the fleet for a decision after a probe verdict.
	Facts func() (decide.NodeFacts, error)
	// Apply carries out a decision taken on a probe verdict.
	Apply func(ctx context.Context, d decide.Decision)
	// Record notes a change of phase (when ch.Phase is set) and a probe verdict
	// (ch.Probe) on the NodeFault of a rule of pack on node.
	Record func(ctx context.Context, node, pack, rule string, ch nodefault.Change)
	// Kick asks for a reconcile now (recovery probes passed).
	Kick func()
	// Phase reads the phase of the NodeFault of a rule of pack on node (a fault
	// that waits for idle GPUs stops waiting when it left AwaitingIdle).
	Phase func(ctx context.Context, node, pack, rule string) (v1alpha1.Phase, error)
	// Untaint removes the taint of a rule (pack/rule) from node, if faultline placed
	// it, and frees its budget (an unconfirmed taint whose probe passed).
	Untaint func(ctx context.Context, node, rule string) error
	// Results counts probe results by check, status and trigger; Skipped the
	// scheduled rounds skipped, by check; DeepSkipped the nodes a deep check round
	// passed over, by reason (gpus-busy, running).
	Results, Skipped, DeepSkipped *prometheus.CounterVec
	Log                           *slog.Logger
	// Life is the replica's lifetime: manual runs outlive their HTTP request.
	Life context.Context
	// Records keeps a ProbeRun record of every run that has none (all but the
	// runs of ProbeRuns users created); nil: none.
	Records Records
}

// Records records runs as ProbeRun objects (*proberunctl.Recorder).
type Records interface {
	// Started is called once per run, before any of its nodes ends; NodeDone
	// with each node's part once it ended.
	Started(run proberun.Run)
	NodeDone(run proberun.Run, nr proberun.NodeRun)
}

// Triggers starts probe runs and reads their results. With probes off (no agents
// configured) it has no dispatcher: a rule that asks for probes then gets its
// onTimeout policy, and the API answers 503.
type Triggers struct {
	cfg        Config
	deps       Deps
	log        *slog.Logger
	dispatcher *proberun.Dispatcher
	ps         *probeState
	// ap is the compatibility with IBM Autopilot (nil: off); idle, the waits for
	// idle GPUs on busy nodes (nil: probes off).
	ap   *autopilotCompat
	idle *idleWaits
}

// New returns the triggers of cfg; it starts nothing.
func New(cfg Config, deps Deps) (*Triggers, error) {
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Life == nil {
		deps.Life = context.Background()
	}
	t := &Triggers{cfg: cfg, deps: deps, log: deps.Log, ps: newProbeState()}
	if err := t.newDispatcher(deps.Life); err != nil {
		return nil, fmt.Errorf("probes: %w", err)
	}
	return t, nil
}

// On reports whether probes are configured.
func (t *Triggers) On() bool { return t.dispatcher != nil }

func (t *Triggers) newDispatcher(ctx context.Context) error {
	pc := t.cfg
	if pc.Agents == nil && len(pc.AgentURLs) == 0 {
		return nil
	}
	pc.Agents = proberun.AgentResolver{Static: pc.AgentURLs, Pods: pc.Agents}
	if pc.ConfirmTimeout <= 0 {
		pc.ConfirmTimeout = 15 * time.Minute
	}
	if pc.RecoverEvery <= 0 {
		pc.RecoverEvery = 10 * time.Minute
	}
	if pc.IdleEvery <= 0 {
		pc.IdleEvery = time.Minute
	}
	t.cfg = pc
	dc := proberun.Config{Agents: pc.Agents, Token: pc.Token, HTTP: pc.HTTP, Registry: pc.Registry, Local: pc.Local, Batch: pc.Batch,
		NodeTimeout: pc.NodeTimeout, Log: t.log, PickPeer: t.pickPeer, Capacity: t.capacity,
		OnRun:   t.runStarted,
		OnStart: func(run *proberun.Run, node string) { t.probeStarted(ctx, run, node) },
		OnNode:  func(run *proberun.Run, nr proberun.NodeRun) { t.probeDone(ctx, run, nr) }}
	if pc.Autopilot != nil {
		dc.Aliases = autopilot.Aliases()
	}
	d, err := proberun.New(dc)
	if err != nil {
		return err
	}
	t.dispatcher = d
	t.idle = newIdleWaits(pc, t.deps, d, t.record)
	if pc.Autopilot != nil {
		t.ap = newAutopilotCompat(*pc.Autopilot, t.deps, d, t.verdict, t.ProbeNodes)
	}
	return nil
}

// Dispatcher returns the dispatcher (nil when probes are off).
func (t *Triggers) Dispatcher() *proberun.Dispatcher { return t.dispatcher }

// runStarted records a run that has no record yet.
func (t *Triggers) runStarted(run *proberun.Run) {
	if t.deps.Records != nil && !run.Recorded {
		t.deps.Records.Started(*run)
	}
}

// probeStarted notes that probes started on a node and says so in its labels.
func (t *Triggers) probeStarted(ctx context.Context, run *proberun.Run, node string) {
	t.ap.started(ctx, run, node)
	t.setHealth(ctx, node)
}

// probeDone reports one node's results: metrics, a log line per result, an Event
// per run and node, and the health labels.
func (t *Triggers) probeDone(ctx context.Context, run *proberun.Run, nr proberun.NodeRun) {
	if t.deps.Records != nil && !run.Recorded {
		t.deps.Records.NodeDone(*run, nr)
	}
	t.ap.finished(run, nr)
	if run.Trigger == proberun.TriggerDeep && nr.Refused == http.StatusConflict {
		// A node whose GPUs are held (or that runs another invasive check) is
		// skipped, not judged: its labels go back to what they said.
		t.deps.DeepSkipped.WithLabelValues("gpus-busy").Inc()
		t.log.Info("deep checks skipped: the node is busy", "run", run.ID, "node", nr.Node, "pods", nr.Pods, "err", nr.Error)
		t.setHealth(ctx, nr.Node)
		t.ap.setGPUHealth(ctx, nr.Node)
		return
	}
	where := nr.Node
	if where == proberun.ClusterNode {
		where = "cluster"
	}
	var parts []string
	for _, r := range nr.Results {
		t.deps.Results.WithLabelValues(r.Check, string(r.Status), string(run.Trigger)).Inc()
		attrs := []any{"run", run.ID, "trigger", run.Trigger, "node", where, "check", r.Check, "status", r.Status,
			"duration", r.Duration.Round(time.Millisecond).String()}
		if r.Message != "" {
			attrs = append(attrs, "message", r.Message)
		}
		for _, dv := range r.Devices {
			if dv.Status != probe.StatusPass && dv.Status != probe.StatusSkipped {
				attrs = append(attrs, "device_"+dv.ID, string(dv.Status)+": "+dv.Message)
			}
		}
		t.log.Info("probe result", attrs...)
		part := fmt.Sprintf("%s %s", r.Check, r.Status)
		if r.Status != probe.StatusPass && r.Message != "" {
			part += " (" + r.Message + ")"
		}
		parts = append(parts, part)
	}
	if nr.Error != "" {
		t.deps.Results.WithLabelValues(strings.Join(run.Checks, ","), "error", string(run.Trigger)).Inc()
		t.log.Warn("probe run failed", "run", run.ID, "trigger", run.Trigger, "node", where, "checks", run.Checks, "err", nr.Error)
		parts = append(parts, "error: "+nr.Error)
	}
	if nr.Node == proberun.ClusterNode {
		return
	}
	t.ps.mu.Lock()
	m := t.ps.latest[nr.Node]
	if m == nil {
		m = map[string]probe.Status{}
		t.ps.latest[nr.Node] = m
	}
	for _, r := range nr.Results {
		m[r.Check] = r.Status
	}
	if nr.Error != "" && len(nr.Results) == 0 {
		for _, ch := range run.Checks {
			m[ch] = probe.StatusError
		}
	}
	t.ps.mu.Unlock()
	reason := act.ReasonProbePassed
	if nr.Status == probe.StatusFail || nr.Status == probe.StatusError {
		reason = act.ReasonProbeFailed
	}
	msg := fmt.Sprintf("probe run %s (%s", run.ID, run.Trigger)
	if run.Reason != "" {
		msg += ": " + run.Reason
	}
	msg += "): " + strings.Join(parts, "; ")
	if err := t.deps.Actor.Event(ctx, nr.Node, fault.Fault{}, reason, msg); err != nil {
		t.log.Warn("event not recorded", "node", nr.Node, "reason", reason, "err", err)
	}
	t.setHealth(ctx, nr.Node)
	t.ap.setGPUHealth(ctx, nr.Node)
	t.ap.setDCGMLevel3(ctx, nr)
}

// health computes a node's faultline.io/health value.
func (t *Triggers) health(node string) string {
	if t.dispatcher != nil && t.dispatcher.Testing(node) {
		return HealthTesting
	}
	return t.verdict(node)
}

// verdict is the worst latest result over the checks that ran on a node (FAIL,
// WARN, PASS; "" when none ran).
func (t *Triggers) verdict(node string) string {
	t.ps.mu.Lock()
	defer t.ps.mu.Unlock()
	var ss []probe.Status
	for _, s := range t.ps.latest[node] {
		ss = append(ss, s)
	}
	switch probe.Worst(ss...) {
	case "":
		return ""
	case probe.StatusFail:
		return HealthFail
	case probe.StatusWarn, probe.StatusError:
		return HealthWarn
	}
	return HealthPass
}

func (t *Triggers) setHealth(ctx context.Context, node string) {
	if t.cfg.NoHealthLabel || t.deps.Decider.Config().DryRun {
		return // dry-run changes no Node, labels included
	}
	v := t.health(node)
	if v == "" {
		return
	}
	if _, err := t.deps.Actor.SetNodeMeta(ctx, node, map[string]string{LabelHealth: v}, nil); err != nil {
		t.log.Warn("health label not set", "node", node, "value", v, "err", err)
	}
}

// Confirm runs the probes a rule with action probe asks for, then decides.
func (t *Triggers) Confirm(ctx context.Context, f fault.Fault) {
	key := f.Key()
	t.ps.mu.Lock()
	// One confirmation of a fault at a time, but one of an ended term does not
	// count: it writes nothing once its context ends, and the next term's resumed
	// confirmation (resumeHeld) must not be turned away while it winds down.
	if live, ok := t.ps.confirming[key]; ok && live.Err() == nil {
		t.ps.mu.Unlock()
		return
	}
	t.ps.confirming[key] = ctx
	t.ps.mu.Unlock()
	defer func() {
		t.ps.mu.Lock()
		if t.ps.confirming[key] == ctx {
			delete(t.ps.confirming, key)
		}
		t.ps.mu.Unlock()
	}()
	failed, timedOut, summary := false, true, "probes are not configured"
	if t.dispatcher != nil {
		run, err := t.dispatcher.Start(ctx, proberun.Request{Nodes: []string{f.Node}, Checks: f.Rule.Probe.Checks,
			Trigger: proberun.TriggerRule, Reason: f.Rule.String()})
		if err != nil {
			summary = err.Error()
		} else {
			wctx, cancel := context.WithTimeout(ctx, t.cfg.ConfirmTimeout)
			run, err = t.dispatcher.Wait(wctx, run.ID)
			cancel()
			switch {
			case err != nil:
				summary = fmt.Sprintf("no answer within %s", t.cfg.ConfirmTimeout)
			case t.idle.confirm(ctx, f, run):
				return // the invasive checks wait for idle GPUs (busy.go)
			default:
				failed, timedOut, summary = judge(run)
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	facts, err := t.deps.Facts()
	if err != nil {
		t.log.Error("node facts", "err", err)
		return
	}
	if failed || timedOut {
		// The probe verdict joins the log lines as evidence on the node.
		f.Evidence = append(f.Evidence, logstream.Line{Time: time.Now(), Text: "probe: " + summary})
	}
	next := t.deps.Decider.DecideProbe(f, decide.ProbeResult{Outcome: decide.OutcomeOf(failed, timedOut)}, facts)
	ch := nodefault.Change{Probe: &v1alpha1.ProbeVerdict{Purpose: "confirm",
		Checks: f.Rule.Probe.Checks, Verdict: verdict(failed, timedOut), Message: summary}}
	if next.Kind == decide.KindNone {
		// A confirmation that leads to nothing ends the fault: the probe did not
		// confirm it (or its fleet fault was dismissed meanwhile). Any other outcome
		// writes its own phase when it is applied.
		ch.Phase, ch.Message = v1alpha1.PhaseResolved, next.Message
		switch {
		case failed:
			ch.Cause, ch.Reason, ch.Decision = nodefault.CauseDismiss, string(decide.VerdictDismissed), "dismiss"
		case timedOut:
			ch.Cause, ch.Reason, ch.Decision = nodefault.CauseProbeTimedOut, ReasonProbeTimedOut, "probe-timed-out"
		default:
			ch.Cause, ch.Reason, ch.Decision = nodefault.CauseProbePassed, ReasonProbePassed, "probe-passed"
		}
	}
	t.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, ch)
	t.log.Info("probe confirmation", "node", f.Node, "rule", f.Rule.String(), "failed", failed, "timed_out", timedOut,
		"summary", summary, "decision", next.Kind, "message", next.Message)
	if next.Kind != decide.KindNone {
		t.deps.Apply(ctx, next)
	}
}

// The reasons of a fault a confirming probe did not confirm (status.reason of its
// Resolved record).
const (
	ReasonProbePassed   = "ProbePassed"
	ReasonProbeTimedOut = "ProbeTimedOut"
)

func (t *Triggers) record(ctx context.Context, node, pack, rule string, ch nodefault.Change) {
	if t.deps.Record != nil {
		t.deps.Record(ctx, node, pack, rule, ch)
	}
}

func verdict(failed, timedOut bool) string {
	switch {
	case failed:
		return "failed"
	case timedOut:
		return "timed-out"
	}
	return "passed"
}

// judge reads a finished run: failed when a check failed; timedOut when nothing
// failed but a check could not reach a verdict (error, timeout, refused, agent down).
func judge(run proberun.Run) (failed, timedOut bool, summary string) {
	var parts []string
	for _, nr := range run.Nodes {
		for _, r := range nr.Results {
			switch r.Status {
			case probe.StatusFail:
				failed = true
			case probe.StatusError:
				timedOut = true
			}
			s := fmt.Sprintf("%s %s", r.Check, r.Status)
			if r.Message != "" && r.Status != probe.StatusPass {
				s += " (" + r.Message + ")"
			}
			parts = append(parts, s)
		}
		if nr.Error != "" {
			timedOut = true
			parts = append(parts, "error: "+nr.Error)
		}
	}
	if failed {
		timedOut = false
	}
	return failed, timedOut, strings.Join(parts, "; ")
}

// Recovery starts the recovery probes of a tainted fault whose policy waits
// only for them, at most every RecoverEvery; it returns when they last passed.
func (t *Triggers) Recovery(ctx context.Context, a decide.ActiveFault, boot string, last, now time.Time) time.Time {
	key := fault.Key(a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule)
	t.ps.mu.Lock()
	passed, started := t.ps.passed[key], t.ps.recovering[key]
	t.ps.mu.Unlock()
	if t.dispatcher == nil || a.Rule == nil || len(a.Rule.Recover.Probes) == 0 {
		return passed
	}
	probe := a
	probe.ProbesPassed = now
	if ok, _ := t.deps.Decider.Recoverable(probe, now, boot, last); !ok {
		return passed // something else (time, reboot) is still missing
	}
	every := t.cfg.RecoverEvery
	waiting := t.idle.recoveryWaits(key)
	if waiting {
		every = t.cfg.IdleEvery
	}
	if passed.After(last) || (!started.IsZero() && now.Sub(started) < every) {
		return passed
	}
	t.ps.mu.Lock()
	t.ps.recovering[key] = now
	t.ps.mu.Unlock()
	run, err := t.dispatcher.Start(ctx, proberun.Request{Nodes: []string{a.Node}, Checks: a.Rule.Recover.Probes,
		Trigger: proberun.TriggerRecovery, Reason: a.Record.PackRule()})
	if err != nil {
		t.log.Warn("recovery probes not started", "node", a.Node, "rule", a.Record.PackRule(), "err", err)
		return passed
	}
	if !waiting { // one that waits for idle GPUs keeps saying so until they are
		t.record(ctx, a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule, nodefault.Change{Phase: v1alpha1.PhaseRecovering,
			Cause: nodefault.CauseRecover, Message: fmt.Sprintf("recovery probes %v run", a.Rule.Recover.Probes)})
	}
	go func() {
		r, err := t.dispatcher.Wait(ctx, run.ID)
		if err != nil || t.idle.recovery(ctx, a, r) {
			return
		}
		failed, timedOut, summary := judge(r)
		v := &v1alpha1.ProbeVerdict{Purpose: "recover", Checks: a.Rule.Recover.Probes, Verdict: verdict(failed, timedOut), Message: summary}
		if failed || timedOut {
			t.log.Info("recovery probes did not pass", "node", a.Node, "rule", a.Record.PackRule(), "summary", summary)
			// Still tainted: the record goes back to Tainted with the verdict.
			t.record(ctx, a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule, nodefault.Change{Phase: v1alpha1.PhaseTainted,
				Cause: nodefault.CauseRecoverFailed, Message: "recovery probes did not pass: " + summary, Probe: v})
			return
		}
		t.record(ctx, a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule, nodefault.Change{Probe: v})
		t.ps.mu.Lock()
		t.ps.passed[key] = time.Now()
		delete(t.ps.recovering, key)
		t.ps.mu.Unlock()
		t.log.Info("recovery probes passed", "node", a.Node, "rule", a.Record.PackRule())
		t.deps.Kick()
	}()
	return passed
}

// RunSchedules runs each scheduled check on the selected nodes at its interval; a
// run still going when the next is due is not overlapped (that tick is skipped).
func (t *Triggers) RunSchedules(ctx context.Context) {
	if t.dispatcher == nil || len(t.cfg.Schedules) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, s := range t.cfg.Schedules {
		if s.Every <= 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(s.Every)
			defer tick.Stop()
			var current string
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if current != "" {
					if r, ok := t.dispatcher.Get(current); ok && r.State != proberun.StateDone {
						t.log.Warn("scheduled probe still running; skipping this round", "check", s.Check, "run", current)
						t.deps.Skipped.WithLabelValues(s.Check).Inc()
						continue
					}
				}
				nodes, err := t.ProbeNodes()
				if err != nil || len(nodes) == 0 {
					continue
				}
				req := proberun.Request{Nodes: nodes, Checks: []string{s.Check}, Trigger: proberun.TriggerSchedule,
					Reason: "every " + s.Every.String()}
				if len(s.Params) > 0 {
					req.Params = map[string]probe.Params{s.Check: s.Params}
				}
				run, err := t.dispatcher.Start(ctx, req)
				if err != nil {
					t.log.Warn("scheduled probe not started", "check", s.Check, "err", err)
					continue
				}
				current = run.ID
			}
		}()
	}
	wg.Wait()
}

// capacity is a node's capacity of a resource as the Node informer last saw it (its
// cache keeps act.GPUResource alone: any other resource is unknown).
func (t *Triggers) capacity(node, resource string) (int64, bool) {
	n, err := t.deps.Actor.Nodes().Get(node)
	if err != nil {
		return 0, false
	}
	q, ok := n.Status.Capacity[corev1.ResourceName(resource)]
	if !ok {
		return 0, false
	}
	return q.Value(), true
}

// ProbeNodes lists the nodes scheduled probes run on (and /status when it names none).
func (t *Triggers) ProbeNodes() ([]string, error) {
	sel := t.cfg.NodeSelector
	if sel == nil {
		sel = labels.Everything()
	}
	return t.deps.Actor.Nodes().Names(sel), nil
}

// pickPeer chooses the peer of a network check that names none: the next probe node
// after node (in name order) that carries no faultline taint and whose health is not
// FAIL, so a healthy neighbour measures the suspect link.
func (t *Triggers) pickPeer(node string) (string, error) {
	nodes, err := t.ProbeNodes()
	if err != nil {
		return "", err
	}
	facts, err := t.deps.Facts()
	if err != nil {
		return "", err
	}
	start := sort.SearchStrings(nodes, node)
	for i := 1; i <= len(nodes); i++ {
		cand := nodes[(start+i)%len(nodes)]
		if cand == node || len(facts.Tainted[cand]) > 0 || t.health(cand) == HealthFail {
			continue
		}
		if _, err := t.cfg.Agents.Endpoint(context.Background(), cand); err != nil {
			continue
		}
		return cand, nil
	}
	return "", fmt.Errorf("no healthy probe node besides %s", node)
}

// SelectNodes resolves a label selector to node names (the API's selector field).
func (t *Triggers) SelectNodes(selector string) ([]string, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	return t.deps.Actor.Nodes().Names(sel), nil
}

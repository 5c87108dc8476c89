// Package controller wires the controller's stages: Loki source → match and
// correlate → decide (budget, storm hold, dry-run) → act (taint, evidence, Events),
// plus recovery, pack hot-reload, the read checkpoint, leader election and the HTTP
// API. Each stage lives in its own package; this one only connects them.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/checkpoint"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/leader"
	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/controller/match"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/packwatch"
	"github.com/faultline-dev/faultline/controller/probes"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// Config configures a Controller.
type Config struct {
	Client    kubernetes.Interface
	Namespace string // where the Lease and the checkpoint ConfigMap live
	Identity  string // this replica, usually the pod name
	// PodName, when set, receives Events about the controller itself (pack reloads).
	PodName string

	LeaseName      string // default faultline-controller
	CheckpointName string // default faultline-checkpoint
	Election       leader.Config

	Packs     packwatch.Config
	Loki      lokisource.Config // URL, auth, tuning; the queries are built from the packs
	Selectors lokisource.Selectors

	Decide decide.Config
	Act    act.Options
	Probes ProbeConfig

	// CheckpointEvery: how often the leader saves its read position (default 2s).
	CheckpointEvery time.Duration
	// ReconcileEvery: how often recoveries are checked and held faults released (default 10s).
	ReconcileEvery time.Duration
	// InitialLookback: with no saved position, start this far back (default 10m).
	InitialLookback time.Duration
	// EvidenceRefresh: a fault that fires again on a node already carrying its taint
	// updates the evidence on the Node at most this often (default 30s). A burst of
	// the same fault must not turn into one Node write (and Event) per line, which
	// would stall the pipeline behind the client's rate limit.
	EvidenceRefresh time.Duration

	// Records configures the NodeFault records (retention, Grafana link); the
	// owner is Identity.
	Records nodefault.Options

	Metrics *Metrics
	Log     *slog.Logger
}

// Controller is one replica; only the leader reads Loki and acts.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	m       *Metrics
	actor   *act.Actor
	decider *decide.Decider
	packs   *packwatch.Watcher
	store   *checkpoint.Store
	records *nodefault.Store

	mu        sync.Mutex
	src       *lokisource.Source // while leading
	lastMatch map[string]time.Time
	leading   bool
	tainted   map[string]bool // nodes faultline had tainted at the last reconcile
	ready     bool
	refreshed map[string]time.Time     // fault key → last evidence write for an already-tainted node
	recorded  map[string]recordedPhase // fault key → phase last written to its NodeFault

	dispatcher *probes.Dispatcher // nil when probes are off
	ps         *probeState
	kickCh     chan struct{} // asks for a reconcile now
	// life is the replica's lifetime: manual probe runs outlive their HTTP request.
	life     context.Context
	lifeStop context.CancelFunc
}

// New builds a Controller; it loads the packs (an error is fatal: there is no last
// good set yet) but starts nothing.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("controller: no Kubernetes client")
	}
	if cfg.Namespace == "" || cfg.Identity == "" {
		return nil, errors.New("controller: namespace and identity are required")
	}
	if cfg.LeaseName == "" {
		cfg.LeaseName = "faultline-controller"
	}
	if cfg.CheckpointName == "" {
		cfg.CheckpointName = "faultline-checkpoint"
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 2 * time.Second
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = 10 * time.Second
	}
	if cfg.InitialLookback <= 0 {
		cfg.InitialLookback = 10 * time.Minute
	}
	if cfg.EvidenceRefresh <= 0 {
		cfg.EvidenceRefresh = 30 * time.Second
	}
	if cfg.Selectors == nil {
		cfg.Selectors = lokisource.DefaultSelectors()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	c := &Controller{cfg: cfg, log: cfg.Log, m: cfg.Metrics, lastMatch: map[string]time.Time{}, tainted: map[string]bool{},
		refreshed: map[string]time.Time{}, recorded: map[string]recordedPhase{}, ps: newProbeState(), kickCh: make(chan struct{}, 1)}
	c.life, c.lifeStop = context.WithCancel(context.Background())
	var err error
	cfg.Act.DryRun = cfg.Act.DryRun || cfg.Decide.DryRun
	cfg.Decide.DryRun = cfg.Act.DryRun
	if c.actor, err = act.New(cfg.Client, cfg.Act); err != nil {
		return nil, err
	}
	if c.decider, err = decide.New(cfg.Decide); err != nil {
		return nil, err
	}
	pc := cfg.Packs
	pc.OnReload = c.onReload
	pc.OnError = c.onPackError
	if c.packs, err = packwatch.New(pc); err != nil {
		return nil, fmt.Errorf("controller: rule packs: %w", err)
	}
	c.store = checkpoint.New(cfg.Client, cfg.Namespace, cfg.CheckpointName)
	rc := cfg.Records
	rc.Owner = cfg.Identity
	if rc.NodeLabel == "" {
		rc.NodeLabel = cfg.Loki.NodeLabel
	}
	if c.records, err = nodefault.New(cfg.Client, rc); err != nil {
		return nil, err
	}
	if err := c.newDispatcher(c.life); err != nil {
		return nil, fmt.Errorf("controller: probes: %w", err)
	}
	return c, nil
}

// Run starts the replica: the Node cache, the pack watcher and the election. It
// returns when ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	defer c.lifeStop()
	stop := context.AfterFunc(ctx, c.lifeStop)
	defer stop()
	if err := c.actor.Start(ctx); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	defer c.actor.Shutdown()
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	go c.packs.Run(ctx)
	ec := c.cfg.Election
	ec.Client, ec.Namespace, ec.Name, ec.Identity = c.cfg.Client, c.cfg.Namespace, c.cfg.LeaseName, c.cfg.Identity
	ec.OnNewLeader = func(id string) { c.log.Info("leader", "identity", id, "self", id == c.cfg.Identity) }
	return leader.Run(ctx, ec, c.lead)
}

// lead runs the pipeline while this replica holds the lease.
func (c *Controller) lead(ctx context.Context) {
	c.m.leader.Set(1)
	defer c.m.leader.Set(0)
	c.log.Info("leading: reading Loki")
	for ctx.Err() == nil {
		if err := c.pipeline(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("pipeline stopped, restarting", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
}

func (c *Controller) pipeline(ctx context.Context) error {
	from, err := c.loadPosition(ctx)
	if err != nil {
		return err
	}
	lc := c.cfg.Loki
	lc.Queries = lokisource.EngineQueries(c.cfg.Selectors, c.packs.Engine())
	lc.Metrics = c.m.loki
	lc.BootID = c.currentBootID
	if lc.Logger == nil {
		lc.Logger = c.log
	}
	src, err := lokisource.New(lc)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.src, c.leading = src, true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.src, c.leading = nil, false
		c.mu.Unlock()
	}()
	// Faults the previous leader held wait here too, in their order.
	c.resumeHeld(ctx)
	stage := match.New(c.packs.Engine)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); c.saveLoop(pctx, src) }()
	go func() { defer wg.Done(); c.reconcileLoop(pctx) }()
	go func() { defer wg.Done(); c.scheduleLoop(pctx) }()
	err = src.Run(pctx, from, func(e logstream.Line) error {
		c.process(pctx, stage, e)
		return nil
	})
	cancel()
	wg.Wait()
	// Save the final position so the next leader starts exactly here.
	c.savePosition(context.WithoutCancel(ctx), src)
	return err
}

func (c *Controller) loadPosition(ctx context.Context) (lokisource.Checkpoint, error) {
	raw, err := c.store.LoadState(ctx)
	if err != nil {
		return lokisource.Checkpoint{}, err
	}
	if raw == nil {
		start := time.Now().Add(-c.cfg.InitialLookback)
		c.log.Info("no saved position: starting from the lookback", "start", start)
		return lokisource.StartAt(start), nil
	}
	var cp lokisource.Checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		return lokisource.Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	c.log.Info("resuming from the saved position", "position", cp.Min())
	return cp, nil
}

func (c *Controller) saveLoop(ctx context.Context, src *lokisource.Source) {
	t := time.NewTicker(c.cfg.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.savePosition(ctx, src)
		}
	}
}

func (c *Controller) savePosition(ctx context.Context, src *lokisource.Source) {
	cp := src.Checkpoint()
	raw, err := json.Marshal(cp)
	if err != nil {
		c.log.Error("checkpoint", "err", err)
		return
	}
	if err := c.store.SaveState(ctx, raw, cp.Min()); err != nil {
		c.log.Warn("checkpoint not saved, will retry", "err", err)
		c.m.checkpointErrors.Inc()
	}
}

// process runs one line through match → decide → act.
func (c *Controller) process(ctx context.Context, stage *match.Stage, e logstream.Line) {
	c.m.lines.WithLabelValues(e.Query).Inc()
	res := stage.Process(e)
	if e.Node == "" {
		c.m.noNode.Inc()
	}
	for _, o := range res.Matches {
		c.m.matches.WithLabelValues(o.Rule.String(), string(o.Rule.Severity)).Inc()
		c.mu.Lock()
		c.lastMatch[fault.Key(e.Node, o.Rule.Pack, o.Rule.ID)] = e.Time
		c.mu.Unlock()
	}
	for _, f := range res.Faults {
		if f.Rule.Action == rules.ActionNone {
			continue // evidence-only rules (context lines) need no decision
		}
		facts, err := c.facts()
		if err != nil {
			c.log.Error("node facts", "err", err)
			continue
		}
		c.apply(ctx, c.decider.Decide(f, facts))
	}
}

func (c *Controller) facts() (decide.NodeFacts, error) { return c.actor.Facts() }

// apply carries a decision out and reports it (Event, metric, log).
func (c *Controller) apply(ctx context.Context, d decide.Decision) {
	f := d.Fault
	kind := string(d.Kind)
	result := "ok"
	defer func() { c.m.decisions.WithLabelValues(kind, result).Inc() }()
	defer func() {
		if result == "ok" {
			c.recordDecision(ctx, d, d.Message)
		}
	}()
	switch d.Kind {
	case decide.KindTaint, decide.KindAlreadyTainted:
		if d.Kind == decide.KindAlreadyTainted && !c.refreshDue(f.Key()) {
			result = "recent"
			return
		}
		boot, _ := c.actor.BootID(f.Node)
		res, err := c.actor.TaintNode(ctx, f, boot)
		if err != nil {
			result = "error"
			if errors.Is(err, act.ErrOptedOut) {
				result = "opted-out"
			}
			c.decider.NotApplied(f)
			c.log.Warn("taint not applied", "node", f.Node, "rule", f.Rule.String(), "err", err)
			return
		}
		// The actor records the FaultTainted Event with the evidence.
		c.log.Info("tainted", "node", f.Node, "rule", f.Rule.String(), "added", res.Added, "count", f.Count)
	case decide.KindEvent:
		c.event(ctx, f, act.ReasonEvent, fmt.Sprintf("%s (%s): %s; %s", f.Rule, f.Rule.Severity, f.Rule.Description, lastLine(f)))
	case decide.KindProbe:
		// The taint waits for the probes; the line stream does not.
		msg := fmt.Sprintf("%s: running probes %v to confirm; %s", f.Rule, f.Rule.Probe.Checks, lastLine(f))
		if c.dispatcher == nil {
			msg = fmt.Sprintf("%s asks for probes %v, but probes are not configured; applying onTimeout=%s",
				f.Rule, f.Rule.Probe.Checks, f.Rule.Probe.OnTimeout)
		}
		c.event(ctx, f, act.ReasonEvent, msg)
		go c.confirm(ctx, f)
	case decide.KindHold:
		reason := act.ReasonHeld
		if d.Reason == decide.ReasonStorm {
			reason = act.ReasonStormHold
		}
		kind = "hold-" + string(d.Reason)
		c.event(ctx, f, reason, fmt.Sprintf("%s held (%s): %s", f.Rule, d.Reason, d.Message))
		c.log.Warn("fault held", "node", f.Node, "rule", f.Rule.String(), "reason", d.Reason, "message", d.Message)
	case decide.KindDryRun:
		kind = "dry-run-" + string(d.Of)
		c.event(ctx, f, act.ReasonDryRun, fmt.Sprintf("dry-run: would %s for %s: %s", d.Of, f.Rule, lastLine(f)))
	case decide.KindNone:
	}
	// Gauges need a pass over every Node: refresh them when a taint or a hold
	// changed them, not on every Event (Reconcile refreshes them periodically too).
	if d.Kind == decide.KindTaint || d.Kind == decide.KindHold {
		c.updateGauges()
	}
}

func (c *Controller) event(ctx context.Context, f fault.Fault, reason, msg string) {
	if err := c.actor.Event(ctx, f.Node, f, reason, msg); err != nil {
		c.log.Warn("event not recorded", "node", f.Node, "reason", reason, "err", err)
	}
}

func lastLine(f fault.Fault) string {
	if len(f.Evidence) == 0 {
		return ""
	}
	l := f.Evidence[len(f.Evidence)-1].Text
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return fmt.Sprintf("%d match(es), last: %q", f.Count, l)
}

func (c *Controller) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.ReconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Reconcile(ctx)
		case <-c.kickCh:
			c.Reconcile(ctx)
		}
	}
}

// Reconcile clears faults whose recovery policy allows it, notices taints removed by
// hand, and applies held faults there is now room for.
func (c *Controller) Reconcile(ctx context.Context) {
	active, err := c.actor.ListActive()
	if err != nil {
		c.log.Warn("reconcile", "err", err)
		return
	}
	now := time.Now()
	for _, nf := range active {
		boot, _ := c.actor.BootID(nf.Node)
		for _, ev := range nf.Faults {
			if !ev.TaintPlaced {
				continue
			}
			c.mu.Lock()
			last := c.lastMatch[fault.Key(nf.Node, ev.Pack, ev.Rule)]
			c.mu.Unlock()
			if last.Before(ev.Time) {
				last = ev.Time
			}
			af := decide.ActiveFault{Node: nf.Node, Rule: c.rule(ev), Evidence: ev}
			af.ProbesPassed = c.recoveryProbes(ctx, af, boot, last, now)
			ok, why := c.decider.Recoverable(af, now, boot, last)
			if !ok {
				continue
			}
			if _, err := c.actor.UntaintNode(ctx, nf.Node, ev.ID()); err != nil {
				c.log.Warn("recovery untaint failed", "node", nf.Node, "rule", ev.ID(), "err", err)
				continue
			}
			c.decider.Untainted(nf.Node, ev.ID())
			c.resolved(ctx, nf.Node, []string{ev.ID()}, "recovered: "+why)
			c.m.decisions.WithLabelValues("untaint", "ok").Inc()
			c.log.Info("recovered", "node", nf.Node, "rule", ev.ID(), "why", why)
		}
	}
	facts, err := c.facts()
	if err != nil {
		return
	}
	// Taints removed by hand (faultline untaint, kubectl) free their budget now.
	c.mu.Lock()
	for node := range c.tainted {
		if len(facts.Tainted[node]) == 0 {
			c.decider.Untainted(node)
		}
	}
	c.tainted = map[string]bool{}
	for node := range facts.Tainted {
		c.tainted[node] = true
	}
	c.mu.Unlock()
	for _, d := range c.decider.Release(facts) {
		c.apply(ctx, d)
	}
	c.collectResolved(ctx)
	c.updateGauges()
}

// refreshDue says whether the evidence of an already-tainted fault may be written
// now, and notes the write.
func (c *Controller) refreshDue(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if last, ok := c.refreshed[key]; ok && now.Sub(last) < c.cfg.EvidenceRefresh {
		return false
	}
	if len(c.refreshed) > 100000 {
		c.refreshed = map[string]time.Time{}
	}
	c.refreshed[key] = now
	return true
}

// kick asks the reconcile loop for a pass now (recovery probes passed).
func (c *Controller) kick() {
	select {
	case c.kickCh <- struct{}{}:
	default:
	}
}

// rule finds the loaded rule of an evidence entry (nil if the packs no longer have it).
func (c *Controller) rule(ev fault.Evidence) *rules.Compiled {
	return c.packs.Engine().Set().Rule(ev.Pack, ev.Rule)
}

// Untaint removes faultline's taint(s) from a node (rule "" or "*": all) — the API
// and `faultline untaint` behind it.
func (c *Controller) Untaint(ctx context.Context, node, rule string) (act.Result, error) {
	if rule == "" {
		rule = act.AllRules
	}
	res, err := c.actor.UntaintNode(ctx, node, rule)
	if err != nil {
		return res, err
	}
	c.decider.Untainted(node)
	c.resolved(ctx, node, res.Cleared, "untainted by request")
	c.m.decisions.WithLabelValues("untaint", "ok").Inc()
	c.updateGauges()
	return res, nil
}

func (c *Controller) updateGauges() {
	facts, err := c.facts()
	if err != nil {
		return
	}
	c.m.taintedNodes.Set(float64(len(facts.Tainted)))
	c.m.budgetLeft.Set(float64(c.decider.BudgetLeft(facts)))
	held := map[string]int{}
	for _, h := range c.decider.Held() {
		held[string(h.Reason)]++
	}
	for _, r := range []decide.HoldReason{decide.ReasonBudget, decide.ReasonRuleBudget, decide.ReasonStorm, decide.ReasonOptedOut} {
		c.m.held.WithLabelValues(string(r)).Set(float64(held[string(r)]))
	}
}

func (c *Controller) onReload(e *rules.Engine) {
	c.m.packRules.Set(float64(len(e.Set().Rules)))
	c.m.reloads.Inc()
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src != nil {
		if err := src.SetQueries(lokisource.EngineQueries(c.cfg.Selectors, e)); err != nil {
			c.log.Error("new LogQL queries refused; keeping the old ones", "err", err)
		}
	}
	c.log.Info("rule packs loaded", "rules", len(e.Set().Rules), "disabled", len(e.Set().Disabled))
}

func (c *Controller) onPackError(err error) {
	c.m.reloadErrors.Inc()
	c.log.Error("rule packs rejected; the last good set stays active", "err", err)
	if c.cfg.PodName == "" {
		return
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: c.cfg.PodName, Namespace: c.cfg.Namespace}}
	msg := err.Error()
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	if e := c.actor.EventOn(pod, corev1.EventTypeWarning, act.ReasonPackReloadFailed, msg); e != nil {
		c.log.Warn("event not recorded", "err", e)
	}
}

// Ready reports whether the replica can serve (its Node cache is synced).
func (c *Controller) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Leading reports whether this replica currently runs the pipeline.
func (c *Controller) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

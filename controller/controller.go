// Package controller assembles the faultline controller: the pipeline of stages
// (pipeline.go lists them in order: Loki source → match and correlate → decide →
// act), the probe triggers beside it, reconcile, the read position, pack hot reload,
// leader election and the HTTP API. Each stage lives in its own package; this one
// only connects them.
package controller

import (
	"context"
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
	"github.com/faultline-dev/faultline/controller/escalate"
	"github.com/faultline-dev/faultline/controller/leader"
	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/packwatch"
	"github.com/faultline-dev/faultline/controller/proberunctl"
	"github.com/faultline-dev/faultline/controller/steps"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/controller/workloads"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// The names of the controller's objects in its namespace. The RBAC Role grants get
// and update on these names only (controller/rbac).
const (
	DefaultLeaseName      = "faultline-controller"
	DefaultCheckpointName = "faultline-checkpoint"
)

// Config configures a Controller.
type Config struct {
	Client    kubernetes.Interface
	Namespace string // where the Lease and the checkpoint ConfigMap live
	Identity  string // this replica, usually the pod name
	// PodName, when set, receives Events about the controller itself (pack reloads).
	PodName string

	LeaseName      string // default DefaultLeaseName
	CheckpointName string // default DefaultCheckpointName
	Election       leader.Config

	Packs     packwatch.Config
	Loki      lokisource.Config // URL, auth, tuning; the queries are built from the packs
	Selectors lokisource.Selectors

	Decide decide.Config
	Act    act.Options
	Probes trigger.Config
	// Escalation configures the steps of the rules' escalation ladders.
	Escalation EscalationConfig

	// CheckpointEvery: how often the leader saves its read position (default 2s).
	CheckpointEvery time.Duration
	// ReconcileEvery: how often recoveries are checked and held faults released (default 10s).
	ReconcileEvery time.Duration
	// InitialLookback: with no saved position, start this far back (default 10m).
	InitialLookback time.Duration
	// EvidenceRefresh: a fault that fires again on a node already carrying its taint
	// updates its evidence (NodeFault) at most this often (default 30s). A burst of
	// the same fault must not turn into one Node write (and Event) per line, which
	// would stall the pipeline behind the client's rate limit.
	EvidenceRefresh time.Duration
	// ActWorkers: how many decisions are carried out at once, each node's one at a
	// time and in order (default DefaultActWorkers).
	ActWorkers int

	// Records configures the NodeFault records (retention, Grafana link); the
	// owner is Identity.
	Records nodefault.Options
	// ProbeRunRetention: a finished ProbeRun is deleted this long after it ended
	// (default proberunctl.DefaultRetention).
	ProbeRunRetention time.Duration
	// WhileLeading, when set, runs while this replica leads, until the term ends
	// (the intake's address published for the collector).
	WhileLeading func(ctx context.Context)
	// AffectedPods lists, in a fault's NodeFault, the pods that held the node's
	// GPUs when the fault was recorded, and posts a Warning Event on each
	// (workloads.Tracker): it watches the cluster's bound, unfinished pods.
	AffectedPods bool

	Metrics *Metrics
	Log     *slog.Logger
}

// EscalationConfig configures the steps of the rules' escalation ladders.
type EscalationConfig struct {
	// Remediator creates the remediate step's objects; nil: a remediate step fails
	// (recorded) until one is configured.
	Remediator *act.Remediator
	// DrainTimeout bounds one drain attempt (default act.DefaultDrainTimeout); a
	// drain a PodDisruptionBudget blocks, or whose evicted pods are still
	// terminating, waits and is tried again at the next reconcile.
	DrainTimeout time.Duration
	// DrainGraceSeconds, when set, overrides the pods' termination grace period.
	DrainGraceSeconds *int
}

// Controller is one replica; only the leader reads Loki and acts.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	m       *Metrics
	actor   *act.Actor
	decider *decide.Decider
	packs   *packwatch.Watcher
	keep    *keeper
	desk    *requestDesk // operators' requests on faults
	records *nodefault.Store
	rec     *recorder
	shard   *shard
	fleet   *fleetBook
	carrier *carrier
	gauges  *gauges

	mu        sync.Mutex
	src       *lokisource.Source // while leading
	pos       *positions         // while leading: the read positions of the term
	seen      *lastSeen
	leading   bool
	tainted   map[string]bool // nodes faultline had tainted at the last reconcile
	taintedAt time.Time       // when that reconcile read them
	ready     bool

	intake   intakeDoor        // pushed lines, decided while leading
	triggers *trigger.Triggers // probe runs: API, schedule, confirmation, recovery
	// probeRuns runs the ProbeRun objects while leading.
	probeRuns *proberunctl.Reconciler
	// runRecords records the runs this replica starts itself as ProbeRuns.
	runRecords *proberunctl.Recorder
	ladders    *escalate.Ladders // the rules' escalation ladders
	kickCh     chan struct{}     // asks for a reconcile now
	// life is the replica's lifetime: manual probe runs outlive their HTTP request.
	life     context.Context
	lifeStop context.CancelFunc

	// workloads are the GPU pods a fault touches (nil unless Config.AffectedPods).
	workloads *workloads.Tracker
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
		cfg.LeaseName = DefaultLeaseName
	}
	if cfg.CheckpointName == "" {
		cfg.CheckpointName = DefaultCheckpointName
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
	if cfg.ActWorkers <= 0 {
		cfg.ActWorkers = DefaultActWorkers
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
	c := &Controller{cfg: cfg, log: cfg.Log, m: cfg.Metrics, seen: &lastSeen{at: map[string]time.Time{}}, tainted: map[string]bool{},
		kickCh: make(chan struct{}, 1)}
	c.life, c.lifeStop = context.WithCancel(context.Background())
	var err error
	rc := cfg.Records
	rc.Owner = cfg.Identity
	if rc.NodeLabel == "" {
		rc.NodeLabel = cfg.Loki.NodeLabel
	}
	rc.Refresh = cfg.EvidenceRefresh
	rc.Refused, rc.Log = c.m.phaseRefused, c.log
	if cfg.AffectedPods {
		if c.workloads, err = c.newWorkloads(); err != nil {
			return nil, err
		}
		rc.Workloads = c.workloads
	}
	if c.records, err = nodefault.New(cfg.Client, rc); err != nil {
		return nil, err
	}
	ao := cfg.Act
	ao.Records = c.records // the taint bookkeeping is written as this replica
	ao.TopologyLabels = cfg.Decide.Fleet.Labels
	if c.actor, err = act.New(cfg.Client, ao); err != nil {
		return nil, err
	}
	c.rec = &recorder{store: c.records, actor: c.actor, errors: c.m.recordErrors, log: c.log}
	// An operator's request on a fault is answered at once, not at the next pass.
	if err := c.actor.OnRequest(c.kick); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c.m.setRecords(c.actor.NodeFaults)
	if c.decider, err = decide.New(cfg.Decide); err != nil {
		return nil, err
	}
	c.fleet = &fleetBook{decider: c.decider, rec: c.rec, actor: c.actor, decisions: c.m.decisions, pending: c.m.fleetFaults,
		log: c.log, dryRun: cfg.Decide.DryRun, pod: podOf(cfg), written: map[string]fleetWritten{}}
	c.gauges = &gauges{actor: c.actor, decider: c.decider, m: c.m, ch: make(chan struct{}, 1)}
	c.carrier = &carrier{decider: c.decider, actor: c.actor, rec: c.rec, fleet: c.fleet, gauges: c.gauges,
		decisions: c.m.decisions, log: c.log}
	c.shard = &shard{actor: c.actor, decider: c.decider, set: func() *rules.Set { return c.packs.Engine().Set() },
		moved: c.m.shardMoves, log: c.log}
	if c.actor.Sharded() {
		if err := c.actor.OnMembership(c.shard.note); err != nil {
			return nil, fmt.Errorf("controller: shard: %w", err)
		}
	}
	pc := cfg.Packs
	pc.OnReload = c.onReload
	pc.OnError = c.onPackError
	if c.packs, err = packwatch.New(pc); err != nil {
		return nil, fmt.Errorf("controller: rule packs: %w", err)
	}
	c.keep = &keeper{store: checkpoint.New(cfg.Client, cfg.Namespace, cfg.CheckpointName), decider: c.decider,
		fleet: len(cfg.Decide.Fleet.Labels) > 0, lookback: cfg.InitialLookback, every: cfg.CheckpointEvery,
		errors: c.m.checkpointErrors, log: c.log}
	c.desk = &requestDesk{faults: c.actor.NodeFaults, records: c.records, decider: c.decider, fleet: c.fleet, rec: c.rec,
		keep: c.keep, untaint: c.Untaint, kick: c.kick, requests: c.m.requests, errors: c.m.recordErrors, log: c.log,
		positions: func() *positions {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.pos
		}}
	c.runRecords, err = proberunctl.NewRecorder(proberunctl.RecorderConfig{Client: cfg.Client, Identity: cfg.Identity, Log: c.log})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c.triggers, err = trigger.New(cfg.Probes, trigger.Deps{Actor: c.actor, Decider: c.decider, Facts: c.actor.Facts,
		Apply: c.carrier.submit, Record: c.rec.probe, Kick: c.kick, Phase: c.rec.phase, Untaint: c.untaintUnconfirmed, Results: c.m.probeResults, Skipped: c.m.probeSkipped, DeepSkipped: c.m.deepSkipped,
		Log: c.log, Life: c.life, Records: c.runRecords})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c.carrier.triggers = c.triggers
	c.probeRuns, err = proberunctl.New(proberunctl.Config{Client: cfg.Client, Runner: c.triggers, Nodes: c.actor.Nodes(),
		Retention: cfg.ProbeRunRetention, Identity: cfg.Identity, Log: c.log})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	ec := cfg.Escalation
	c.ladders, err = escalate.New(escalate.Deps{Records: c.records, Nodes: c.actor, Decider: c.decider, Facts: c.actor.Facts,
		Rules: func() *rules.Set { return c.packs.Engine().Set() }, Decisions: c.m.decisions, RecordErrors: c.m.recordErrors, Log: c.log,
		StepDeps: steps.Deps{Nodes: c.actor, Remediator: ec.Remediator, GPUs: c.triggers, NotApplied: c.decider.Taints().NotApplied,
			DrainTimeout: ec.DrainTimeout, DrainGraceSeconds: ec.DrainGraceSeconds, Namespace: cfg.Namespace}})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c.carrier.ladder = c.ladders.Fire
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
	if c.workloads != nil {
		go c.workloads.Run(ctx)
	}
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	go c.packs.Run(ctx)
	go c.runRecords.Run(c.life)
	ec := c.cfg.Election
	if ec.Client == nil {
		ec.Client = c.cfg.Client
	}
	ec.Namespace, ec.Name, ec.Identity = c.cfg.Namespace, c.cfg.LeaseName, c.cfg.Identity
	ec.OnNewLeader = func(id string) { c.log.Info("leader", "identity", id, "self", id == c.cfg.Identity) }
	return leader.Run(ctx, ec, c.lead)
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
	pod := podOf(c.cfg)
	if pod == nil {
		return
	}
	msg := err.Error()
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	if e := c.actor.EventOn(pod, corev1.EventTypeWarning, act.ReasonPackReloadFailed, msg); e != nil {
		c.log.Warn("event not recorded", "err", e)
	}
}

// podOf is the controller's own Pod, where Events about the controller go; nil when
// its name is not known.
func podOf(cfg Config) *corev1.Pod {
	if cfg.PodName == "" {
		return nil
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: cfg.PodName, Namespace: cfg.Namespace}}
}

// Ready reports whether the replica can serve (its Node cache is synced).
func (c *Controller) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Triggers returns the probe triggers (manual runs go through Start).
func (c *Controller) Triggers() *trigger.Triggers { return c.triggers }

// Push decides lines the collector pushed to the intake, as the Loki reading
// decides those it reads (each line once, whichever path brings it first);
// intake.ErrNotLeading while this replica does not lead.
func (c *Controller) Push(ctx context.Context, lines []logstream.Line) error {
	return c.intake.push(ctx, lines)
}

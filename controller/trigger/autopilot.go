package trigger

import (
	"context"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/controller/autopilot"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/proberun"
)

// Autopilot configures the compatibility with IBM Autopilot (controller/autopilot):
// its check names are accepted wherever a check is named, the nodes carry its
// labels, and its deep checks run periodically on idle nodes.
type Autopilot struct {
	// DeepEvery is how often each probe node gets the deep checks (0: never).
	DeepEvery time.Duration
}

// autopilotCompat writes Autopilot's node labels and runs its deep checks: the
// triggers' part that only an install with the compatibility on has (nil: off).
type autopilotCompat struct {
	cfg        Autopilot
	deps       Deps
	log        *slog.Logger
	dispatcher *proberun.Dispatcher
	// verdict is faultline's latest verdict of a node's checks (Triggers.verdict);
	// probeNodes lists the nodes probes run on.
	verdict    func(node string) string
	probeNodes func() ([]string, error)

	mu       sync.Mutex
	invasive map[string]int    // node → invasive runs in progress there
	evicted  map[string]bool   // nodes whose gpuhealth label says EVICT
	deep     map[string]string // node → its deep checks' run in progress
}

func newAutopilotCompat(cfg Autopilot, deps Deps, d *proberun.Dispatcher, verdict func(string) string, nodes func() ([]string, error)) *autopilotCompat {
	return &autopilotCompat{cfg: cfg, deps: deps, log: deps.Log, dispatcher: d, verdict: verdict, probeNodes: nodes,
		invasive: map[string]int{}, evicted: map[string]bool{}, deep: map[string]string{}}
}

// started notes an invasive run starting on a node: its label says TESTING.
func (a *autopilotCompat) started(ctx context.Context, run *proberun.Run, node string) {
	if a == nil || !a.dispatcher.Invasive(run.Checks, run.Params) {
		return
	}
	a.mu.Lock()
	a.invasive[node]++
	a.mu.Unlock()
	a.setGPUHealth(ctx, node)
}

// finished notes the end of a node's part of a run.
func (a *autopilotCompat) finished(run *proberun.Run, nr proberun.NodeRun) {
	if a == nil || nr.Node == proberun.ClusterNode || !a.dispatcher.Invasive(run.Checks, run.Params) {
		return
	}
	a.mu.Lock()
	if a.invasive[nr.Node]--; a.invasive[nr.Node] <= 0 {
		delete(a.invasive, nr.Node)
	}
	a.mu.Unlock()
}

// deepSlots is how many parts a deep round is spread over: each node's checks
// start in the part its name hashes to, so about one node in deepSlots runs them
// at a time, and each node once per DeepEvery.
const deepSlots = 16

// setGPUHealth writes a node's autopilot.ibm.com/gpuhealth label (compatibility
// on, not in dry-run).
func (a *autopilotCompat) setGPUHealth(ctx context.Context, node string) {
	if a == nil || a.deps.Decider.Config().DryRun {
		return
	}
	facts, err := a.deps.Facts()
	if err != nil {
		a.log.Warn("gpuhealth label not set", "node", node, "err", err)
		return
	}
	a.writeGPUHealth(ctx, node, facts)
}

func (a *autopilotCompat) writeGPUHealth(ctx context.Context, node string, facts decide.NodeFacts) {
	evict := len(facts.Tainted[node]) > 0
	a.mu.Lock()
	deep := a.invasive[node] > 0
	a.mu.Unlock()
	v := autopilot.GPUHealth(a.verdict(node), deep, evict)
	if v == "" {
		// No verdict of ours: the label stays as it is, unless it says what no
		// longer holds (a deep check refused, a taint gone), which is removed.
		n, err := a.deps.Actor.Nodes().Get(node)
		if err != nil {
			return
		}
		if cur := n.Labels[autopilot.LabelGPUHealth]; cur != autopilot.GPUHealthTesting && cur != autopilot.GPUHealthEvict {
			return
		}
	}
	if _, err := a.deps.Actor.SetNodeMeta(ctx, node, map[string]string{autopilot.LabelGPUHealth: v}, nil); err != nil {
		a.log.Warn("gpuhealth label not set", "node", node, "value", v, "err", err)
		return
	}
	a.mu.Lock()
	if evict {
		a.evicted[node] = true
	} else {
		delete(a.evicted, node)
	}
	a.mu.Unlock()
}

// SyncGPUHealth brings the gpuhealth label of the nodes whose faultline taints
// came or went to EVICT or back (the reconcile loop calls it with the fleet's
// facts).
func (t *Triggers) SyncGPUHealth(ctx context.Context, facts decide.NodeFacts) {
	t.ap.syncGPUHealth(ctx, facts)
}

func (a *autopilotCompat) syncGPUHealth(ctx context.Context, facts decide.NodeFacts) {
	if a == nil || a.deps.Decider.Config().DryRun {
		return
	}
	a.mu.Lock()
	var nodes []string
	for n := range a.evicted {
		if len(facts.Tainted[n]) == 0 {
			nodes = append(nodes, n)
		}
	}
	for n, keys := range facts.Tainted {
		if len(keys) > 0 && !a.evicted[n] {
			nodes = append(nodes, n)
		}
	}
	a.mu.Unlock()
	for _, n := range nodes {
		a.writeGPUHealth(ctx, n, facts)
	}
}

// setDCGMLevel3 writes the dcgm.level.3 label and its output annotation after a
// node's dcgm level 3 result (compatibility on, not in dry-run).
func (a *autopilotCompat) setDCGMLevel3(ctx context.Context, nr proberun.NodeRun) {
	if a == nil || a.deps.Decider.Config().DryRun || nr.Node == proberun.ClusterNode {
		return
	}
	for _, r := range nr.Results {
		if check, _ := a.dispatcher.Resolve(r.Check, nil); check != "dcgm" || r.Params["level"] != "3" {
			continue
		}
		label, output, ok := autopilot.DCGMLevel3(r, nr.Finished)
		if !ok {
			continue
		}
		if _, err := a.deps.Actor.SetNodeMeta(ctx, nr.Node, map[string]string{autopilot.LabelDCGMLevel3: label},
			map[string]string{autopilot.AnnotationDCGMLevel3Output: output}); err != nil {
			a.log.Warn("dcgm.level.3 label not set", "node", nr.Node, "value", label, "err", err)
		}
	}
}

// RunDeepChecks runs the deep checks (autopilot.DeepChecks) on every probe node
// once per DeepEvery, spread over the interval, never on a node whose previous
// deep checks still run. They are asked without force: an agent that refuses
// because containers hold the node's GPUs (409) has the node skipped and counted,
// never forced.
func (t *Triggers) RunDeepChecks(ctx context.Context) { t.ap.runDeepChecks(ctx) }

func (a *autopilotCompat) runDeepChecks(ctx context.Context) {
	if a == nil || a.cfg.DeepEvery <= 0 {
		return
	}
	checks, params := autopilot.DeepChecks()
	tick := time.NewTicker(a.cfg.DeepEvery / deepSlots)
	defer tick.Stop()
	for slot := uint32(0); ; slot = (slot + 1) % deepSlots {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		nodes, err := a.probeNodes()
		if err != nil {
			continue
		}
		var due []string
		a.mu.Lock()
		for _, n := range nodes {
			if deepSlot(n) != slot {
				continue
			}
			if id := a.deep[n]; id != "" {
				if r, ok := a.dispatcher.Get(id); ok && r.State != proberun.StateDone {
					a.deps.DeepSkipped.WithLabelValues("running").Inc()
					continue
				}
			}
			due = append(due, n)
		}
		a.mu.Unlock()
		if len(due) == 0 {
			continue
		}
		run, err := a.dispatcher.Start(ctx, proberun.Request{Nodes: due, Checks: checks, Params: params,
			Trigger: proberun.TriggerDeep, Reason: "deep checks every " + a.cfg.DeepEvery.String()})
		if err != nil {
			a.log.Warn("deep checks not started", "nodes", due, "err", err)
			continue
		}
		a.mu.Lock()
		for _, n := range due {
			a.deep[n] = run.ID
		}
		a.mu.Unlock()
	}
}

// deepSlot is the part of a deep round a node's checks start in.
func deepSlot(node string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return h.Sum32() % deepSlots
}

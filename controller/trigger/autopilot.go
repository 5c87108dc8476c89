package trigger

import (
	"context"
	"hash/fnv"
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

// deepSlots is how many parts a deep round is spread over: each node's checks
// start in the part its name hashes to, so about one node in deepSlots runs them
// at a time, and each node once per DeepEvery.
const deepSlots = 16

// setGPUHealth writes a node's autopilot.ibm.com/gpuhealth label (compatibility
// on, not in dry-run).
func (t *Triggers) setGPUHealth(ctx context.Context, node string) {
	if t.cfg.Autopilot == nil || t.deps.Decider.Config().DryRun {
		return
	}
	facts, err := t.deps.Facts()
	if err != nil {
		t.log.Warn("gpuhealth label not set", "node", node, "err", err)
		return
	}
	t.writeGPUHealth(ctx, node, facts)
}

func (t *Triggers) writeGPUHealth(ctx context.Context, node string, facts decide.NodeFacts) {
	evict := len(facts.Tainted[node]) > 0
	t.ps.mu.Lock()
	deep := t.ps.invasive[node] > 0
	t.ps.mu.Unlock()
	v := autopilot.GPUHealth(t.verdict(node), deep, evict)
	if v == "" {
		// No verdict of ours: the label stays as it is, unless it says what no
		// longer holds (a deep check refused, a taint gone), which is removed.
		n, err := t.deps.Actor.NodeLister().Get(node)
		if err != nil {
			return
		}
		if cur := n.Labels[autopilot.LabelGPUHealth]; cur != autopilot.GPUHealthTesting && cur != autopilot.GPUHealthEvict {
			return
		}
	}
	if _, err := t.deps.Actor.SetNodeLabel(ctx, node, autopilot.LabelGPUHealth, v); err != nil {
		t.log.Warn("gpuhealth label not set", "node", node, "value", v, "err", err)
		return
	}
	t.ps.mu.Lock()
	if evict {
		t.ps.evicted[node] = true
	} else {
		delete(t.ps.evicted, node)
	}
	t.ps.mu.Unlock()
}

// SyncGPUHealth brings the gpuhealth label of the nodes whose faultline taints
// came or went to EVICT or back (the reconcile loop calls it with the fleet's
// facts).
func (t *Triggers) SyncGPUHealth(ctx context.Context, facts decide.NodeFacts) {
	if t.cfg.Autopilot == nil || t.deps.Decider.Config().DryRun {
		return
	}
	t.ps.mu.Lock()
	var nodes []string
	for n := range t.ps.evicted {
		if len(facts.Tainted[n]) == 0 {
			nodes = append(nodes, n)
		}
	}
	for n, keys := range facts.Tainted {
		if len(keys) > 0 && !t.ps.evicted[n] {
			nodes = append(nodes, n)
		}
	}
	t.ps.mu.Unlock()
	for _, n := range nodes {
		t.writeGPUHealth(ctx, n, facts)
	}
}

// setDCGMLevel3 writes the dcgm.level.3 label and its output annotation after a
// node's dcgm level 3 result (compatibility on, not in dry-run).
func (t *Triggers) setDCGMLevel3(ctx context.Context, nr proberun.NodeRun) {
	if t.cfg.Autopilot == nil || t.deps.Decider.Config().DryRun || nr.Node == proberun.ClusterNode {
		return
	}
	for _, r := range nr.Results {
		if check, _ := t.dispatcher.Resolve(r.Check, nil); check != "dcgm" || r.Params["level"] != "3" {
			continue
		}
		label, output, ok := autopilot.DCGMLevel3(r, nr.Finished)
		if !ok {
			continue
		}
		if _, err := t.deps.Actor.SetNodeMeta(ctx, nr.Node, map[string]string{autopilot.LabelDCGMLevel3: label},
			map[string]string{autopilot.AnnotationDCGMLevel3Output: output}); err != nil {
			t.log.Warn("dcgm.level.3 label not set", "node", nr.Node, "value", label, "err", err)
		}
	}
}

// RunDeepChecks runs the deep checks (autopilot.DeepChecks) on every probe node
// once per DeepEvery, spread over the interval, never on a node whose previous
// deep checks still run. They are asked without force: an agent that refuses
// because containers hold the node's GPUs (409) has the node skipped and counted,
// never forced.
func (t *Triggers) RunDeepChecks(ctx context.Context) {
	if t.dispatcher == nil || t.cfg.Autopilot == nil || t.cfg.Autopilot.DeepEvery <= 0 {
		return
	}
	checks, params := autopilot.DeepChecks()
	tick := time.NewTicker(t.cfg.Autopilot.DeepEvery / deepSlots)
	defer tick.Stop()
	for slot := uint32(0); ; slot = (slot + 1) % deepSlots {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		nodes, err := t.probeNodes()
		if err != nil {
			continue
		}
		var due []string
		t.ps.mu.Lock()
		for _, n := range nodes {
			if deepSlot(n) != slot {
				continue
			}
			if id := t.ps.deep[n]; id != "" {
				if r, ok := t.dispatcher.Get(id); ok && r.State != proberun.StateDone {
					t.deps.DeepSkipped.WithLabelValues("running").Inc()
					continue
				}
			}
			due = append(due, n)
		}
		t.ps.mu.Unlock()
		if len(due) == 0 {
			continue
		}
		run, err := t.dispatcher.Start(ctx, proberun.Request{Nodes: due, Checks: checks, Params: params,
			Trigger: proberun.TriggerDeep, Reason: "deep checks every " + t.cfg.Autopilot.DeepEvery.String()})
		if err != nil {
			t.log.Warn("deep checks not started", "nodes", due, "err", err)
			continue
		}
		t.ps.mu.Lock()
		for _, n := range due {
			t.ps.deep[n] = run.ID
		}
		t.ps.mu.Unlock()
	}
}

// deepSlot is the part of a deep round a node's checks start in.
func deepSlot(node string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return h.Sum32() % deepSlots
}

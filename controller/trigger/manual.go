package trigger

import (
	"context"
	"errors"
	"fmt"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/proberun"
)

// Limits on manual runs, so that one caller cannot probe the whole fleet at once.
const (
	// MaxBatch is the most nodes a manual run probes at once.
	MaxBatch = 50
	// MaxManualRuns is how many manual runs may be in progress on a replica.
	MaxManualRuns = 4
)

// Request is a manual run: a ProbeRun's spec.
type Request struct {
	// Nodes by name, or Selector: a label selector over nodes (one of the two).
	Nodes    []string
	Selector string
	Checks   []string
	Params   map[string]probe.Params
	Force    bool
	Batch    int
	// Recorded: the run has its ProbeRun already (proberun.Request).
	Recorded bool
	// OnNode is called with each node's results as they come (proberun.Request).
	OnNode func(proberun.NodeRun)
}

// Start starts a manual run (a ProbeRun) with the limits of manual runs
// (MaxBatch, MaxManualRuns); it runs until ctx ends.
func (t *Triggers) Start(ctx context.Context, req Request, trigger proberun.Trigger) (proberun.Run, error) {
	if t.dispatcher == nil {
		return proberun.Run{}, fmt.Errorf("probes are not configured")
	}
	nodes := req.Nodes
	if req.Selector != "" {
		if len(nodes) > 0 {
			return proberun.Run{}, fmt.Errorf("give nodes or a selector, not both")
		}
		var err error
		if nodes, err = t.SelectNodes(req.Selector); err != nil {
			return proberun.Run{}, err
		}
		if len(nodes) == 0 {
			return proberun.Run{}, fmt.Errorf("no node matches %q", req.Selector)
		}
	}
	for _, n := range nodes {
		if _, err := t.deps.Actor.Nodes().Get(n); err != nil {
			return proberun.Run{}, fmt.Errorf("node %q: %w", n, err)
		}
	}
	if req.Batch > MaxBatch {
		return proberun.Run{}, fmt.Errorf("batch %d: at most %d nodes are probed at once", req.Batch, MaxBatch)
	}
	if trigger == proberun.TriggerManual {
		active := 0
		for _, r := range t.dispatcher.List() {
			if r.Trigger == proberun.TriggerManual && r.State != proberun.StateDone {
				active++
			}
		}
		if active >= MaxManualRuns {
			return proberun.Run{}, fmt.Errorf("%w: %d manual runs are in progress (at most %d)", ErrBusy, active, MaxManualRuns)
		}
	}
	if ctx.Err() != nil {
		return proberun.Run{}, fmt.Errorf("controller is shutting down or no longer leads")
	}
	pr := proberun.Request{Nodes: nodes, Checks: req.Checks, Params: req.Params, Force: req.Force, Batch: req.Batch, Trigger: trigger,
		Recorded: req.Recorded, OnNode: req.OnNode}
	if err := t.dispatcher.Validate(pr); err != nil {
		return proberun.Run{}, err
	}
	if err := t.dispatcher.CheckAgents(ctx, pr); err != nil {
		return proberun.Run{}, err
	}
	return t.dispatcher.Start(ctx, pr)
}

// ErrBusy: too many manual runs are in progress; the run waits for a slot.
var ErrBusy = errors.New("busy")

// RunsInController reports whether a check (or an alias of one) runs in the
// controller, once per run, rather than on the nodes; false with probes off.
func (t *Triggers) RunsInController(check string) bool {
	return t.dispatcher != nil && t.dispatcher.RunsInController(check)
}

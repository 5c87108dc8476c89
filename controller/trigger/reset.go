package trigger

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/proberun"
)

// ErrGPUsBusy: the node's agent refused the reset for now (409): containers hold
// its GPUs, or another invasive check runs there. The step waits and is tried again.
var ErrGPUsBusy = errors.New("the node's GPUs are busy")

// Reset is what a gpu-reset step found.
type Reset struct {
	// Message is what the gpu-reset check said (the GPUs reset).
	Message string
	// Checks are the confirming probes run after the reset, Verdict theirs
	// (passed, failed, timed-out) and Summary their results.
	Checks  []string
	Verdict string
	Summary string
}

// ResetGPUs resets the GPUs of a fault's node through its agent: the GPU its
// evidence names (the rule's pci capture), else all of the node's. Then it runs the
// rule's confirming probes (its probe.checks; none: the node's default checks) and
// records their verdict in the fault's record as a confirming probe, so a
// probeFailed step after this one climbs on a failed verdict. A refusal for GPUs in
// use is ErrGPUsBusy; a reset that did not pass is an error.
func (t *Triggers) ResetGPUs(ctx context.Context, f fault.Fault) (Reset, error) {
	if t.dispatcher == nil {
		return Reset{}, errors.New("probes are not configured: no agent to reset the GPUs")
	}
	req := proberun.Request{Nodes: []string{f.Node}, Checks: []string{probe.GPUResetCheck},
		Trigger: proberun.TriggerEscalation, Reason: f.Rule.String()}
	if pci := probe.NormalizePCI(f.Captures["pci"]); pci != "" {
		req.Params = map[string]probe.Params{probe.GPUResetCheck: {"pci": pci}}
	}
	nr, err := t.runOn(ctx, req)
	if err != nil {
		return Reset{}, err
	}
	if nr.Refused == http.StatusConflict {
		return Reset{}, fmt.Errorf("%w: %s", ErrGPUsBusy, nr.Error)
	}
	if nr.Error != "" {
		return Reset{}, fmt.Errorf("gpu-reset on %s: %s", f.Node, nr.Error)
	}
	if len(nr.Results) != 1 || nr.Results[0].Status != probe.StatusPass {
		_, _, summary := judge(proberun.Run{Nodes: []proberun.NodeRun{nr}})
		return Reset{}, fmt.Errorf("gpu-reset on %s did not pass: %s", f.Node, summary)
	}
	out := Reset{Message: nr.Results[0].Message, Checks: f.Rule.Probe.Checks}
	if len(out.Checks) == 0 {
		out.Checks = t.registry().DefaultEnabled()
	}
	confirm, err := t.runOn(ctx, proberun.Request{Nodes: []string{f.Node}, Checks: out.Checks,
		Trigger: proberun.TriggerEscalation, Reason: f.Rule.String() + " after gpu-reset"})
	if err != nil {
		return Reset{}, fmt.Errorf("confirming probes after gpu-reset: %w", err)
	}
	failed, timedOut, summary := judge(proberun.Run{Nodes: []proberun.NodeRun{confirm}})
	out.Verdict, out.Summary = verdict(failed, timedOut), summary
	t.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Probe: &v1alpha1.ProbeVerdict{Purpose: "confirm",
		Checks: out.Checks, Verdict: out.Verdict, Message: "after gpu-reset: " + summary}})
	return out, nil
}

// runOn runs a request on its one node and waits for it (at most ConfirmTimeout).
func (t *Triggers) runOn(ctx context.Context, req proberun.Request) (proberun.NodeRun, error) {
	run, err := t.dispatcher.Start(ctx, req)
	if err != nil {
		return proberun.NodeRun{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, t.cfg.ConfirmTimeout)
	defer cancel()
	run, err = t.dispatcher.Wait(wctx, run.ID)
	if err != nil {
		return proberun.NodeRun{}, fmt.Errorf("%s on %s: no answer within %s", strings.Join(req.Checks, ","), req.Nodes[0], t.cfg.ConfirmTimeout)
	}
	if len(run.Nodes) != 1 {
		return proberun.NodeRun{}, fmt.Errorf("%s: run %s has %d node(s), want 1", strings.Join(req.Checks, ","), run.ID, len(run.Nodes))
	}
	return run.Nodes[0], nil
}

// registry is the list of checks the dispatcher knows.
func (t *Triggers) registry() *probe.Registry {
	if t.cfg.Registry != nil {
		return t.cfg.Registry
	}
	return probe.Default()
}

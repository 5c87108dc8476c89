package trigger

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// ReasonWaitingForIdleGPUs is the status.reason of a fault whose confirming
// (phase AwaitingIdle) or recovery (phase Recovering) probes wait for the pods that
// hold the node's GPUs: the agent runs no invasive check under them.
const ReasonWaitingForIdleGPUs = "WaitingForIdleGPUs"

// busyChecks says which checks of a node's run the agent refused because the node
// was busy (409: pods hold its GPUs, or another invasive check runs there), and the
// pods it named: the invasive ones of a mixed run (NodeRun.NotRun), or all of them
// when the run asked for invasive checks only.
func busyChecks(nr proberun.NodeRun, asked []string) (refused, pods []string, ok bool) {
	if nr.Refused != http.StatusConflict {
		return nil, nil, false
	}
	if len(nr.NotRun) > 0 {
		return nr.NotRun, nr.Pods, true
	}
	return asked, nr.Pods, true
}

// nodeRun is node's part of run.
func nodeRun(run proberun.Run, node string) (proberun.NodeRun, bool) {
	i := slices.IndexFunc(run.Nodes, func(nr proberun.NodeRun) bool { return nr.Node == node })
	if i < 0 {
		return proberun.NodeRun{}, false
	}
	return run.Nodes[i], true
}

// judgeRan is judge over the checks that ran: those the agent refused for a busy
// node count neither as a verdict nor as its absence.
func judgeRan(run proberun.Run, node string, refused []string) (failed, timedOut bool, summary string) {
	run.Nodes = slices.Clone(run.Nodes)
	for i := range run.Nodes {
		nr := &run.Nodes[i]
		if nr.Node != node {
			continue
		}
		nr.Results = slices.DeleteFunc(slices.Clone(nr.Results), func(r probe.Result) bool { return slices.Contains(refused, r.Check) })
		if len(nr.NotRun) == 0 {
			nr.Error = "" // the whole run was refused: nothing ran
		}
	}
	return judge(run)
}

// waitingFor says what refused checks wait for.
func waitingFor(refused, pods []string) string {
	msg := fmt.Sprintf("waiting for idle GPUs to run %s", strings.Join(refused, ", "))
	if len(pods) > 0 {
		msg += ": " + strings.Join(pods, "; ")
	}
	return msg
}

// confirmBusy takes over a confirmation whose run the agent answered in part
// because pods hold the node's GPUs, unless the rule's probe.whileBusy is ignore:
// when nothing that ran failed, the fault waits for idle GPUs (phase AwaitingIdle),
// under the unconfirmed taint unless whileBusy is wait, and its refused checks are
// asked for again every IdleEvery. It reports whether it took the fault over (a
// failure that ran, or a run not refused, is judged as any other).
func (t *Triggers) confirmBusy(ctx context.Context, f fault.Fault, run proberun.Run) bool {
	if f.Rule.Probe.WhileBusy == rules.WhileBusyIgnore {
		return false
	}
	nr, ok := nodeRun(run, f.Node)
	if !ok {
		return false
	}
	refused, pods, ok := busyChecks(nr, run.Checks)
	if !ok || len(pods) == 0 {
		// Refused for another reason (another invasive check runs there, or the
		// agent cannot tell who holds the GPUs): no verdict, as before.
		return false
	}
	failed, _, summary := judgeRan(run, f.Node, refused)
	if failed {
		return false
	}
	facts, err := t.deps.Facts()
	if err != nil {
		t.log.Error("node facts", "err", err)
		return true
	}
	waiting := waitingFor(refused, pods)
	if summary != "" {
		summary += "; "
	}
	v := &v1alpha1.ProbeVerdict{Purpose: "confirm", Checks: f.Rule.Probe.Checks, Verdict: "awaiting-idle", Message: summary + waiting}
	t.log.Info("probe confirmation waits for idle GPUs", "node", f.Node, "rule", f.Rule.String(), "refused", refused, "pods", pods,
		"while_busy", f.Rule.Probe.WhileBusy)
	if f.Rule.Probe.WhileBusy == rules.WhileBusyWait {
		t.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Phase: v1alpha1.PhaseAwaitingIdle, Cause: nodefault.CauseAwaitIdle,
			Reason: ReasonWaitingForIdleGPUs, Message: waiting + "; no taint meanwhile (whileBusy: wait)", Decision: "await-idle", Probe: v})
		t.awaitIdle(ctx, f, refused, pods)
		return true
	}
	t.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Probe: v})
	dec := t.deps.Decider.DecideUnconfirmed(f, facts)
	dec.Message = waiting + "; " + dec.Message
	if dec.Unconfirmed {
		// Before the decision is carried out: a firing meanwhile keeps the taint unconfirmed.
		t.awaitIdle(ctx, f, refused, pods)
	}
	// A hold's release asks for the probes again; a rule below enforce records.
	t.deps.Apply(ctx, dec)
	return true
}

// AwaitingIdle says whether fault key waits for idle GPUs to run its confirming
// probe's invasive checks: a taint decided on it meanwhile stays unconfirmed.
func (t *Triggers) AwaitingIdle(key string) bool {
	t.ps.mu.Lock()
	defer t.ps.mu.Unlock()
	return t.ps.awaiting[key]
}

// ResumeAwaiting waits again for idle GPUs for a fault whose record says
// AwaitingIdle (a new leader: the previous one's wait ended with its term): its
// rule's invasive checks are asked for every IdleEvery.
func (t *Triggers) ResumeAwaiting(ctx context.Context, f fault.Fault) {
	if t.dispatcher == nil {
		return
	}
	var invasive []string
	for _, c := range f.Rule.Probe.Checks {
		if t.dispatcher.Invasive([]string{c}, nil) {
			invasive = append(invasive, c)
		}
	}
	if len(invasive) == 0 {
		invasive = f.Rule.Probe.Checks
	}
	t.awaitIdle(ctx, f, invasive, nil)
}

// awaitIdle asks for the refused checks of fault f every IdleEvery, without force,
// until they run (or the fault leaves AwaitingIdle): a failure confirms the fault
// (the rule's taint, its ladder), a pass or no verdict (onTimeout: ignore) removes
// the unconfirmed taint and resolves it. One wait per fault.
func (t *Triggers) awaitIdle(ctx context.Context, f fault.Fault, checks, pods []string) {
	key := f.Key()
	t.ps.mu.Lock()
	if t.ps.awaiting[key] {
		t.ps.mu.Unlock()
		return
	}
	t.ps.awaiting[key] = true
	t.ps.mu.Unlock()
	go func() {
		defer t.endAwait(key)
		_ = wait.PollUntilContextCancel(ctx, t.cfg.IdleEvery, false, func(ctx context.Context) (bool, error) {
			return t.retryIdle(ctx, f, checks, &pods), nil
		})
	}()
}

func (t *Triggers) endAwait(key string) {
	t.ps.mu.Lock()
	defer t.ps.mu.Unlock()
	delete(t.ps.awaiting, key)
}

// retryIdle runs the checks a busy node refused, and reports whether the wait is
// over.
func (t *Triggers) retryIdle(ctx context.Context, f fault.Fault, checks []string, pods *[]string) bool {
	node, pack, id := f.Node, f.Rule.Pack, f.Rule.ID
	phase, err := t.deps.Phase(ctx, node, pack, id)
	switch {
	case err != nil:
		t.log.Warn("NodeFault not read; the invasive checks wait", "node", node, "rule", f.Rule.String(), "err", err)
		return false
	case phase == v1alpha1.PhaseConfirming || phase == v1alpha1.PhaseHeld:
		return false // fired again: that decision goes first
	case phase != v1alpha1.PhaseAwaitingIdle:
		return true // untainted, or decided otherwise meanwhile
	}
	run, err := t.dispatcher.Start(ctx, proberun.Request{Nodes: []string{node}, Checks: checks,
		Trigger: proberun.TriggerRule, Reason: f.Rule.String() + " (waited for idle GPUs)"})
	if err != nil {
		t.log.Warn("invasive checks not started", "node", node, "rule", f.Rule.String(), "err", err)
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, t.cfg.ConfirmTimeout)
	run, err = t.dispatcher.Wait(wctx, run.ID)
	cancel()
	if err != nil {
		return ctx.Err() != nil
	}
	if nr, ok := nodeRun(run, node); ok {
		if refused, now, busy := busyChecks(nr, checks); busy {
			if !slices.Equal(now, *pods) {
				*pods = now
				t.record(ctx, node, pack, id, nodefault.Change{Phase: v1alpha1.PhaseAwaitingIdle, Cause: nodefault.CauseAwaitIdle,
					Reason: ReasonWaitingForIdleGPUs, Message: waitingFor(refused, now)})
			}
			return false
		}
	}
	failed, timedOut, summary := judge(run)
	facts, err := t.deps.Facts()
	if err != nil {
		t.log.Error("node facts", "err", err)
		return false
	}
	v := &v1alpha1.ProbeVerdict{Purpose: "confirm", Checks: checks, Verdict: verdict(failed, timedOut), Message: "after waiting for idle GPUs: " + summary}
	t.log.Info("probe confirmation after waiting for idle GPUs", "node", node, "rule", f.Rule.String(), "failed", failed, "timed_out", timedOut, "summary", summary)
	if failed || (timedOut && f.Rule.Probe.OnTimeout == "taint") {
		t.endAwait(f.Key()) // the taint decided now is the rule's own
		t.record(ctx, node, pack, id, nodefault.Change{Probe: v})
		f.Evidence = append(f.Evidence, logstream.Line{Time: time.Now(), Text: "probe: " + summary})
		t.deps.Apply(ctx, t.deps.Decider.DecideConfirmed(f, !failed, facts))
		return true
	}
	// Not confirmed: the unconfirmed taint, if any, goes, and the fault is over.
	if err := t.deps.Untaint(ctx, node, f.Rule.String()); err != nil {
		t.log.Warn("unconfirmed taint not removed; tried again", "node", node, "rule", f.Rule.String(), "err", err)
		return false
	}
	ch := nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseProbePassed, Reason: ReasonProbePassed,
		Decision: "probe-passed", Message: "invasive probes passed once the GPUs were idle", Probe: v}
	if timedOut {
		ch.Cause, ch.Reason, ch.Decision = nodefault.CauseProbeTimedOut, ReasonProbeTimedOut, "probe-timed-out"
		ch.Message = "invasive probes reached no verdict once the GPUs were idle; onTimeout: " + f.Rule.Probe.OnTimeout
	}
	t.record(ctx, node, pack, id, ch)
	return true
}

// recoveryBusy takes over a recovery run the agent answered in part because the
// node's GPUs are held: when nothing that ran failed, the fault stays Recovering,
// its reason and message say what it waits for, and the run is asked for again
// every IdleEvery instead of every RecoverEvery.
func (t *Triggers) recoveryBusy(ctx context.Context, a decide.ActiveFault, run proberun.Run) bool {
	key := fault.Key(a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule)
	nr, ok := nodeRun(run, a.Node)
	refused, pods, busy := busyChecks(nr, run.Checks)
	if !ok || !busy || len(pods) == 0 {
		t.setIdleWait(key, false)
		return false
	}
	if failed, _, _ := judgeRan(run, a.Node, refused); failed {
		t.setIdleWait(key, false)
		return false
	}
	t.setIdleWait(key, true)
	t.record(ctx, a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule, nodefault.Change{Phase: v1alpha1.PhaseRecovering,
		Cause: nodefault.CauseRecover, Reason: ReasonWaitingForIdleGPUs, Message: "recovery " + waitingFor(refused, pods)})
	t.log.Info("recovery probes wait for idle GPUs", "node", a.Node, "rule", a.Record.PackRule(), "refused", refused, "pods", pods)
	return true
}

// idleWait says whether fault key's recovery probes wait for idle GPUs.
func (t *Triggers) idleWait(key string) bool {
	t.ps.mu.Lock()
	defer t.ps.mu.Unlock()
	return t.ps.idleWait[key]
}

func (t *Triggers) setIdleWait(key string, on bool) {
	t.ps.mu.Lock()
	defer t.ps.mu.Unlock()
	if on {
		t.ps.idleWait[key] = true
	} else {
		delete(t.ps.idleWait, key)
	}
}

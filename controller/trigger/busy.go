package trigger

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
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

// idleWaits is the triggers' part for busy nodes: confirmations and recoveries
// whose invasive checks wait for the pods that hold the node's GPUs.
type idleWaits struct {
	cfg        Config
	deps       Deps
	log        *slog.Logger
	dispatcher *proberun.Dispatcher
	record     func(ctx context.Context, node, pack, rule string, ch nodefault.Change)

	mu             sync.Mutex
	awaitingKeys   map[string]context.Context // fault keys whose confirmation waits for idle GPUs → its term's context
	recoveringKeys map[string]bool            // fault keys whose recovery probes wait for idle GPUs
}

func newIdleWaits(cfg Config, deps Deps, d *proberun.Dispatcher, record func(context.Context, string, string, string, nodefault.Change)) *idleWaits {
	return &idleWaits{cfg: cfg, deps: deps, log: deps.Log, dispatcher: d, record: record,
		awaitingKeys: map[string]context.Context{}, recoveringKeys: map[string]bool{}}
}

// AwaitingIdle says whether fault key waits for idle GPUs to run its confirming
// probe's invasive checks: a taint decided on it meanwhile stays unconfirmed.
func (t *Triggers) AwaitingIdle(key string) bool { return t.idle.awaiting(key) }

// ResumeAwaiting waits again for idle GPUs for a fault whose record says
// AwaitingIdle (a new leader: the previous one's wait ended with its term): its
// rule's invasive checks are asked for every IdleEvery.
func (t *Triggers) ResumeAwaiting(ctx context.Context, f fault.Fault) { t.idle.resume(ctx, f) }

// confirm takes over a confirmation whose run the agent answered in part
// because pods hold the node's GPUs, unless the rule's probe.whileBusy is ignore:
// when nothing that ran failed, the fault waits for idle GPUs (phase AwaitingIdle),
// under the unconfirmed taint unless whileBusy is wait, and its refused checks are
// asked for again every IdleEvery. It reports whether it took the fault over (a
// failure that ran, or a run not refused, is judged as any other).
func (w *idleWaits) confirm(ctx context.Context, f fault.Fault, run proberun.Run) bool {
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
	facts, err := w.deps.Facts()
	if err != nil {
		w.log.Error("node facts", "err", err)
		return true
	}
	waiting := waitingFor(refused, pods)
	if summary != "" {
		summary += "; "
	}
	v := &v1alpha1.ProbeVerdict{Purpose: "confirm", Checks: f.Rule.Probe.Checks, Verdict: "awaiting-idle", Message: summary + waiting}
	w.log.Info("probe confirmation waits for idle GPUs", "node", f.Node, "rule", f.Rule.String(), "refused", refused, "pods", pods,
		"while_busy", f.Rule.Probe.WhileBusy)
	if f.Rule.Probe.WhileBusy == rules.WhileBusyWait {
		w.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Phase: v1alpha1.PhaseAwaitingIdle, Cause: nodefault.CauseAwaitIdle,
			Reason: ReasonWaitingForIdleGPUs, Message: waiting + "; no taint meanwhile (whileBusy: wait)", Decision: "await-idle", Probe: v})
		w.await(ctx, f, refused, pods)
		return true
	}
	w.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Probe: v})
	dec := w.deps.Decider.DecideProbe(f, decide.ProbeResult{Outcome: decide.ProbesAwaitingIdle}, facts)
	dec.Message = waiting + "; " + dec.Message
	if dec.Unconfirmed {
		// Before the decision is carried out: a firing meanwhile keeps the taint unconfirmed.
		w.await(ctx, f, refused, pods)
	}
	// A hold's release asks for the probes again; a rule below enforce records.
	w.deps.Apply(ctx, dec)
	return true
}

func (w *idleWaits) awaiting(key string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	live, ok := w.awaitingKeys[key]
	return ok && live.Err() == nil
}

func (w *idleWaits) resume(ctx context.Context, f fault.Fault) {
	if w == nil {
		return
	}
	var invasive []string
	for _, c := range f.Rule.Probe.Checks {
		if w.dispatcher.Invasive([]string{c}, nil) {
			invasive = append(invasive, c)
		}
	}
	if len(invasive) == 0 {
		invasive = f.Rule.Probe.Checks
	}
	w.await(ctx, f, invasive, nil)
}

// await asks for the refused checks of fault f every IdleEvery, without force,
// until they run (or the fault leaves AwaitingIdle): a failure confirms the fault
// (the rule's taint, its ladder), a pass or no verdict (onTimeout: ignore) removes
// the unconfirmed taint and resolves it. One wait per fault.
func (w *idleWaits) await(ctx context.Context, f fault.Fault, checks, pods []string) {
	key := f.Key()
	w.mu.Lock()
	// A wait of an ended term does not count (see Triggers.Confirm): the next
	// term's resumed wait takes over while it winds down.
	if live, ok := w.awaitingKeys[key]; ok && live.Err() == nil {
		w.mu.Unlock()
		return
	}
	w.awaitingKeys[key] = ctx
	w.mu.Unlock()
	go func() {
		defer w.end(ctx, key)
		_ = wait.PollUntilContextCancel(ctx, w.cfg.IdleEvery, false, func(ctx context.Context) (bool, error) {
			return w.retry(ctx, f, checks, &pods), nil
		})
	}()
}

func (w *idleWaits) end(ctx context.Context, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.awaitingKeys[key] == ctx {
		delete(w.awaitingKeys, key)
	}
}

// retry runs the checks a busy node refused, and reports whether the wait is
// over.
func (w *idleWaits) retry(ctx context.Context, f fault.Fault, checks []string, pods *[]string) bool {
	node, pack, id := f.Node, f.Rule.Pack, f.Rule.ID
	phase, err := w.deps.Phase(ctx, node, pack, id)
	switch {
	case err != nil:
		w.log.Warn("NodeFault not read; the invasive checks wait", "node", node, "rule", f.Rule.String(), "err", err)
		return false
	case phase == v1alpha1.PhaseConfirming || phase == v1alpha1.PhaseHeld:
		return false // fired again: that decision goes first
	case phase != v1alpha1.PhaseAwaitingIdle:
		return true // untainted, or decided otherwise meanwhile
	}
	run, err := w.dispatcher.Start(ctx, proberun.Request{Nodes: []string{node}, Checks: checks,
		Trigger: proberun.TriggerRule, Reason: f.Rule.String() + " (waited for idle GPUs)"})
	if err != nil {
		w.log.Warn("invasive checks not started", "node", node, "rule", f.Rule.String(), "err", err)
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, w.cfg.ConfirmTimeout)
	run, err = w.dispatcher.Wait(wctx, run.ID)
	cancel()
	if err != nil {
		return ctx.Err() != nil
	}
	if nr, ok := nodeRun(run, node); ok {
		if refused, now, busy := busyChecks(nr, checks); busy {
			if !slices.Equal(now, *pods) {
				*pods = now
				w.record(ctx, node, pack, id, nodefault.Change{Phase: v1alpha1.PhaseAwaitingIdle, Cause: nodefault.CauseAwaitIdle,
					Reason: ReasonWaitingForIdleGPUs, Message: waitingFor(refused, now)})
			}
			return false
		}
	}
	failed, timedOut, summary := judge(run)
	facts, err := w.deps.Facts()
	if err != nil {
		w.log.Error("node facts", "err", err)
		return false
	}
	v := &v1alpha1.ProbeVerdict{Purpose: "confirm", Checks: checks, Verdict: verdict(failed, timedOut), Message: "after waiting for idle GPUs: " + summary}
	w.log.Info("probe confirmation after waiting for idle GPUs", "node", node, "rule", f.Rule.String(), "failed", failed, "timed_out", timedOut, "summary", summary)
	if failed || (timedOut && f.Rule.Probe.OnTimeout == "taint") {
		w.end(ctx, f.Key()) // the taint decided now is the rule's own
		w.record(ctx, node, pack, id, nodefault.Change{Probe: v})
		f.Evidence = append(f.Evidence, logstream.Line{Time: time.Now(), Text: "probe: " + summary})
		w.deps.Apply(ctx, w.deps.Decider.DecideProbe(f, decide.ProbeResult{Outcome: decide.OutcomeOf(failed, timedOut), AfterIdleWait: true}, facts))
		return true
	}
	// Not confirmed: the unconfirmed taint, if any, goes, and the fault is over.
	if err := w.deps.Untaint(ctx, node, f.Rule.String()); err != nil {
		w.log.Warn("unconfirmed taint not removed; tried again", "node", node, "rule", f.Rule.String(), "err", err)
		return false
	}
	ch := nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseProbePassed, Reason: ReasonProbePassed,
		Decision: "probe-passed", Message: "invasive probes passed once the GPUs were idle", Probe: v}
	if timedOut {
		ch.Cause, ch.Reason, ch.Decision = nodefault.CauseProbeTimedOut, ReasonProbeTimedOut, "probe-timed-out"
		ch.Message = "invasive probes reached no verdict once the GPUs were idle; onTimeout: " + f.Rule.Probe.OnTimeout
	}
	w.record(ctx, node, pack, id, ch)
	return true
}

// recovery takes over a recovery run the agent answered in part because the
// node's GPUs are held: when nothing that ran failed, the fault stays Recovering,
// its reason and message say what it waits for, and the run is asked for again
// every IdleEvery instead of every RecoverEvery.
func (w *idleWaits) recovery(ctx context.Context, a decide.ActiveFault, run proberun.Run) bool {
	key := fault.Key(a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule)
	nr, ok := nodeRun(run, a.Node)
	refused, pods, busy := busyChecks(nr, run.Checks)
	if !ok || !busy || len(pods) == 0 {
		w.setRecoveryWaits(key, false)
		return false
	}
	if failed, _, _ := judgeRan(run, a.Node, refused); failed {
		w.setRecoveryWaits(key, false)
		return false
	}
	w.setRecoveryWaits(key, true)
	w.record(ctx, a.Node, a.Record.Spec.Pack, a.Record.Spec.Rule, nodefault.Change{Phase: v1alpha1.PhaseRecovering,
		Cause: nodefault.CauseRecover, Reason: ReasonWaitingForIdleGPUs, Message: "recovery " + waitingFor(refused, pods)})
	w.log.Info("recovery probes wait for idle GPUs", "node", a.Node, "rule", a.Record.PackRule(), "refused", refused, "pods", pods)
	return true
}

// recoveryWaits says whether fault key's recovery probes wait for idle GPUs.
func (w *idleWaits) recoveryWaits(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recoveringKeys[key]
}

func (w *idleWaits) setRecoveryWaits(key string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on {
		w.recoveringKeys[key] = true
	} else {
		delete(w.recoveringKeys, key)
	}
}

// Package proberunctl keeps probe runs as ProbeRun objects (faultline.io/v1alpha1).
//
// The Reconciler, on the leading controller, runs the ProbeRuns people create: a
// run not finished is started through the probe triggers (controller/trigger: the
// dispatcher and the limits of manual runs), its results are written to its
// status node by node as they come, a run a previous leader left unfinished is
// finished (the nodes without results are run), and finished runs are deleted
// after their retention, records included.
//
// The Recorder, on every replica, records the runs the controller starts itself
// (rules, recoveries, schedules...): a ProbeRun per run, or per
// v1alpha1.MaxRecordResults results of it, marked v1alpha1.AnnotationRecord, that
// the Reconciler never runs.
//
// One writer per object: every status write goes through the term's workqueue,
// one sync of a name at a time, from the informer's copy and what this term's runs
// reported; a write that conflicts is retried with the next copy.
package proberunctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/trigger"
)

// DefaultRetention is how long a finished run is kept.
const DefaultRetention = 24 * time.Hour

// busyRetry is how soon a run that found every manual-run slot taken is tried again.
const busyRetry = 5 * time.Second

// Runner starts runs (*trigger.Triggers).
type Runner interface {
	On() bool
	Start(ctx context.Context, req trigger.Request, trig proberun.Trigger) (proberun.Run, error)
	RunsInController(check string) bool
}

// Config configures a Reconciler.
type Config struct {
	Client kubernetes.Interface
	Runner Runner
	// Nodes resolves a run's node selector: the sorted names of the nodes it
	// matches (the Node cache's Names).
	Nodes interface {
		Names(labels.Selector) []string
	}
	// Retention: a finished run is deleted this long after it ended (default
	// DefaultRetention).
	Retention time.Duration
	// Identity is this replica, written as the status's owner.
	Identity string
	Log      *slog.Logger
}

// Reconciler runs ProbeRuns while its replica leads.
type Reconciler struct {
	cfg Config
	rc  rest.Interface
	log *slog.Logger
}

// New returns a Reconciler; Run starts it for one term.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Client == nil || cfg.Runner == nil || cfg.Nodes == nil {
		return nil, errors.New("proberunctl: client, runner and node lister are required")
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	rc, err := v1alpha1.NewRESTClient(cfg.Client)
	if err != nil {
		return nil, fmt.Errorf("proberunctl: %w", err)
	}
	return &Reconciler{cfg: cfg, rc: rc, log: cfg.Log}, nil
}

// Run reconciles the ProbeRuns until ctx ends (the end of the replica's term as
// leader): the runs it started end with it, unrecorded, for the next leader.
func (r *Reconciler) Run(ctx context.Context) {
	lw := cache.NewListWatchFromClient(r.rc, v1alpha1.ProbeRunResource, metav1.NamespaceAll, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &v1alpha1.ProbeRun{}, 0, cache.Indexers{})
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "proberuns"})
	defer q.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}); err != nil {
		r.log.Error("probe runs: informer", "err", err)
		return
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	t := &term{ctx: ctx, r: r, q: q, store: inf.GetStore(), runs: map[string]*active{}}
	defer t.stopAll()
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	for t.next() {
	}
}

// term is the reconciler during one term as leader.
type term struct {
	ctx   context.Context
	r     *Reconciler
	q     workqueue.TypedRateLimitingInterface[string]
	store cache.Store

	mu   sync.Mutex
	runs map[string]*active // by name: the runs this term started
}

// active is a run this term started: its nodes and the results reported so far.
type active struct {
	uid     types.UID
	reason  string   // of the Accepted condition: Started or Resumed
	targets []string // the nodes of the run, ClusterNode for the controller's checks
	results map[string]proberun.NodeRun
	cancel  context.CancelFunc
}

func (t *term) next() bool {
	name, quit := t.q.Get()
	if quit {
		return false
	}
	defer t.q.Done(name)
	if err := t.sync(name); err != nil {
		if t.ctx.Err() != nil {
			return true
		}
		if !apierrors.IsConflict(err) {
			t.r.log.Warn("probe run: sync failed, retrying", "run", name, "err", err)
		}
		t.q.AddRateLimited(name)
		return true
	}
	t.q.Forget(name)
	return true
}

func (t *term) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.runs {
		a.cancel()
	}
}

func (t *term) sync(name string) error {
	obj, exists, err := t.store.GetByKey(name)
	if err != nil {
		return err
	}
	pr, _ := obj.(*v1alpha1.ProbeRun)
	t.mu.Lock()
	a := t.runs[name]
	if a != nil && (!exists || pr == nil || pr.UID != a.uid || pr.Status.Finished()) {
		// Deleted (or replaced) mid-run: stop it. Finished: nothing more to record.
		a.cancel()
		delete(t.runs, name)
		a = nil
	}
	t.mu.Unlock()
	if !exists || pr == nil {
		return nil
	}
	pr = pr.DeepCopy()
	if _, ok := pr.Annotations[v1alpha1.AnnotationRecord]; ok {
		// A run a replica started itself: that replica writes its record, the
		// leader only deletes it after its retention (counted from its creation
		// when the replica ended before the run did).
		return t.collect(pr)
	}
	if pr.Status.Finished() {
		return t.collect(pr)
	}
	if a == nil {
		var wait time.Duration
		if a, wait, err = t.start(pr); err != nil || a == nil {
			if wait > 0 {
				t.q.AddAfter(name, wait)
			}
			return err
		}
	}
	return t.record(pr, a)
}

// start starts a run, or the nodes of a resumed run that have no results yet. A
// run that cannot start is recorded Refused (or Pending, while the manual-run
// slots are taken: then it says how soon to try again).
func (t *term) start(pr *v1alpha1.ProbeRun) (*active, time.Duration, error) {
	if trig := pr.Spec.Trigger; trig != "" && trig != string(proberun.TriggerManual) {
		return nil, 0, t.refuse(pr, v1alpha1.ReasonInvalidSpec, fmt.Sprintf("trigger %s: only the controller records such runs; a run by hand is %s", trig, proberun.TriggerManual))
	}
	if !t.r.cfg.Runner.On() {
		return nil, 0, t.refuse(pr, v1alpha1.ReasonProbesOff, "probes are not configured on this controller (see --probe-agent-port / --probe-agent)")
	}
	resumed := len(pr.Status.Nodes) > 0
	var nodes, targets []string
	cluster := true // the controller's checks still to run
	if resumed {
		cluster = false
		for _, n := range pr.Status.Nodes {
			targets = append(targets, n.Node)
			switch {
			case n.Done:
			case n.Node == proberun.ClusterNode:
				cluster = true
			default:
				nodes = append(nodes, n.Node)
			}
		}
	} else {
		var err error
		if nodes, err = t.nodes(pr); err != nil {
			return nil, 0, t.refuse(pr, v1alpha1.ReasonNoMatchingNodes, err.Error())
		}
	}
	var checks []string
	for _, c := range pr.Spec.Checks {
		if t.r.cfg.Runner.RunsInController(c) {
			if cluster {
				checks = append(checks, c)
			}
		} else if !resumed || len(nodes) > 0 {
			checks = append(checks, c)
		}
	}
	if len(checks) == 0 { // a resumed run whose every node has its results
		return &active{uid: pr.UID, reason: v1alpha1.ReasonResumed, targets: targets, cancel: func() {}}, 0, nil
	}
	params := map[string]probe.Params{}
	for c, p := range pr.Spec.Params {
		if slices.Contains(checks, c) {
			params[c] = probe.Params(p)
		}
	}
	if len(params) == 0 {
		params = nil
	}
	name := pr.Name
	ctx, cancel := context.WithCancel(t.ctx)
	a := &active{uid: pr.UID, reason: v1alpha1.ReasonStarted, targets: targets, results: map[string]proberun.NodeRun{}, cancel: cancel}
	if resumed {
		a.reason = v1alpha1.ReasonResumed
	}
	req := trigger.Request{Nodes: nodes, Checks: checks, Params: params, Force: pr.Spec.Force, Batch: int(pr.Spec.Batch), Recorded: true,
		OnNode: func(nr proberun.NodeRun) {
			// A run cut short by the end of the term is the next leader's to finish.
			if ctx.Err() != nil {
				return
			}
			t.mu.Lock()
			a.results[nr.Node] = nr
			t.mu.Unlock()
			t.q.Add(name)
		}}
	// Registered before it starts: a node may end before Start returns.
	t.mu.Lock()
	t.runs[name] = a
	t.mu.Unlock()
	run, err := t.r.cfg.Runner.Start(ctx, req, proberun.TriggerManual)
	if err != nil {
		cancel()
		t.mu.Lock()
		delete(t.runs, name)
		t.mu.Unlock()
		switch {
		case errors.Is(err, trigger.ErrBusy):
			return nil, busyRetry, t.pending(pr, err.Error())
		case errors.Is(err, proberun.ErrNoAgent):
			return nil, 0, t.refuse(pr, v1alpha1.ReasonNoProbeAgent, err.Error())
		default:
			return nil, 0, t.refuse(pr, v1alpha1.ReasonInvalidSpec, err.Error())
		}
	}
	if !resumed {
		t.mu.Lock()
		for _, nr := range run.Nodes {
			a.targets = append(a.targets, nr.Node)
		}
		t.mu.Unlock()
	}
	t.r.log.Info("probe run started", "run", name, "checks", checks, "nodes", len(run.Nodes), "resumed", resumed, "force", pr.Spec.Force)
	return a, 0, nil
}

// nodes are the nodes a new run names, or those its selector picks.
func (t *term) nodes(pr *v1alpha1.ProbeRun) ([]string, error) {
	if pr.Spec.NodeSelector == nil {
		return pr.Spec.Nodes, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pr.Spec.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("nodeSelector: %w", err)
	}
	out := t.r.cfg.Nodes.Names(sel)
	if len(out) == 0 {
		return nil, fmt.Errorf("no node matches %s", sel)
	}
	return out, nil
}

// record writes what the run found so far into its status (fill).
func (t *term) record(pr *v1alpha1.ProbeRun, a *active) error {
	old := pr.Status.DeepCopy()
	t.mu.Lock()
	targets := slices.Clone(a.targets)
	results := maps.Clone(a.results)
	t.mu.Unlock()
	fill(pr, targets, results, a.reason, t.r.cfg.Identity)
	if equalStatus(old, &pr.Status) {
		return nil
	}
	pr.Status.Owner = t.r.cfg.Identity
	if err := t.updateStatus(pr); err != nil {
		return err
	}
	if st := pr.Status; st.Phase == v1alpha1.ProbeRunCompleted {
		t.r.log.Info("probe run completed", "run", pr.Name, "verdict", st.Verdict, "passed", st.Passed, "failed", st.Failed)
	}
	return nil
}

// fill writes into a run's status what it found so far: each node's results once
// it ended (a node already done, by this or an earlier leader, is kept as it is),
// the counts, and Completed once every node of targets is done. reason is the
// Accepted condition's (Started, Resumed); identity the replica that runs it.
func fill(pr *v1alpha1.ProbeRun, targets []string, results map[string]proberun.NodeRun, reason, identity string) {
	st := &pr.Status
	now := metav1.Now()
	have := map[string]int{}
	for i, n := range st.Nodes {
		have[n.Node] = i
	}
	for _, n := range targets {
		if _, ok := have[n]; !ok {
			have[n] = len(st.Nodes)
			st.Nodes = append(st.Nodes, v1alpha1.ProbeRunNode{Node: n})
		}
	}
	for n, nr := range results {
		if i, ok := have[n]; ok && !st.Nodes[i].Done {
			st.Nodes[i] = nodeStatus(nr)
		}
	}
	st.ObservedGeneration = pr.Generation
	st.Checks = strings.Join(pr.Spec.Checks, ",")
	st.NodeCount = int32(len(st.Nodes))
	if st.StartTime == nil {
		st.StartTime = &now
	}
	done, verdicts := 0, []probe.Status{}
	st.Passed, st.Failed = 0, 0
	for _, n := range st.Nodes {
		if !n.Done {
			continue
		}
		done++
		verdicts = append(verdicts, probe.Status(n.Verdict))
		if failed(n.Verdict) {
			st.Failed++
		} else {
			st.Passed++
		}
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ProbeRunAccepted, Status: metav1.ConditionTrue,
		Reason: reason, Message: "run by " + identity, ObservedGeneration: pr.Generation})
	if done == len(st.Nodes) {
		st.Phase = v1alpha1.ProbeRunCompleted
		st.Verdict = string(probe.Worst(verdicts...))
		st.CompletionTime = &now
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ProbeRunComplete, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonAllNodesDone, Message: fmt.Sprintf("%d node(s): %d passed, %d failed", len(st.Nodes), st.Passed, st.Failed),
			ObservedGeneration: pr.Generation})
	} else {
		st.Phase = v1alpha1.ProbeRunRunning
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ProbeRunComplete, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonNodesRunning, Message: fmt.Sprintf("%d of %d node(s) done", done, len(st.Nodes)),
			ObservedGeneration: pr.Generation})
	}
}

// refuse records that the run will not start, and why.
func (t *term) refuse(pr *v1alpha1.ProbeRun, reason, msg string) error {
	now := metav1.Now()
	st := &pr.Status
	st.ObservedGeneration, st.Phase, st.Owner = pr.Generation, v1alpha1.ProbeRunRefused, t.r.cfg.Identity
	st.Checks = strings.Join(pr.Spec.Checks, ",")
	st.CompletionTime = &now
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ProbeRunAccepted, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: pr.Generation})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ProbeRunComplete, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonNotStarted, Message: "nothing ran", ObservedGeneration: pr.Generation})
	t.r.log.Info("probe run refused", "run", pr.Name, "reason", reason, "message", msg)
	return t.updateStatus(pr)
}

// pending records that the run waits for a manual-run slot.
func (t *term) pending(pr *v1alpha1.ProbeRun, msg string) error {
	old := pr.Status.DeepCopy()
	st := &pr.Status
	st.ObservedGeneration, st.Phase = pr.Generation, v1alpha1.ProbeRunPending
	st.Checks = strings.Join(pr.Spec.Checks, ",")
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ProbeRunAccepted, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonWaitingForSlot, Message: msg, ObservedGeneration: pr.Generation})
	if equalStatus(old, st) {
		return nil
	}
	st.Owner = t.r.cfg.Identity
	return t.updateStatus(pr)
}

func (t *term) updateStatus(pr *v1alpha1.ProbeRun) error {
	if t.ctx.Err() != nil {
		return t.ctx.Err() // no longer leading: the next leader writes
	}
	err := t.r.rc.Put().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).SubResource("status").
		Body(pr).Do(t.ctx).Error()
	if err != nil {
		return fmt.Errorf("probe run %s: status: %w", pr.Name, err)
	}
	return nil
}

// collect deletes a finished run past its retention, or looks at it again then.
func (t *term) collect(pr *v1alpha1.ProbeRun) error {
	end := pr.CreationTimestamp.Time
	if pr.Status.CompletionTime != nil {
		end = pr.Status.CompletionTime.Time
	}
	left := time.Until(end.Add(t.r.cfg.Retention))
	if left > 0 {
		t.q.AddAfter(pr.Name, left)
		return nil
	}
	uid := pr.UID
	err := t.r.rc.Delete().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}).Do(t.ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("probe run %s: delete after retention: %w", pr.Name, err)
	}
	t.r.log.Info("probe run deleted after its retention", "run", pr.Name, "retention", t.r.cfg.Retention)
	return nil
}

// nodeStatus is a node's part of a run as its status says it.
func nodeStatus(nr proberun.NodeRun) v1alpha1.ProbeRunNode {
	out := v1alpha1.ProbeRunNode{Node: nr.Node, Done: true, Verdict: string(nr.Status), Error: nr.Error, Refused: int32(nr.Refused),
		Pods: nr.Pods, NotRun: nr.NotRun, StartTime: timeOf(nr.Started), CompletionTime: timeOf(nr.Finished)}
	for _, r := range nr.Results {
		res := v1alpha1.ProbeRunResult{Check: r.Check, Status: string(r.Status), Message: r.Message, Values: values(r.Values),
			Params: r.Params, StartTime: timeOf(r.Started)}
		if r.Duration > 0 {
			res.Duration = &metav1.Duration{Duration: r.Duration}
		}
		for _, d := range r.Devices {
			res.Devices = append(res.Devices, v1alpha1.ProbeRunDevice{ID: d.ID, Status: string(d.Status), Message: d.Message,
				Values: values(d.Values), Failed: d.Failed})
		}
		out.Results = append(out.Results, res)
	}
	return out
}

func values(v map[string]float64) map[string]string {
	if len(v) == 0 {
		return nil
	}
	out := make(map[string]string, len(v))
	for k, f := range v {
		out[k] = strconv.FormatFloat(f, 'f', -1, 64)
	}
	return out
}

func timeOf(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

func failed(verdict string) bool {
	return verdict == string(probe.StatusFail) || verdict == string(probe.StatusError)
}

// equalStatus reports whether two statuses say the same, whatever the times of
// their conditions and of the run.
func equalStatus(a, b *v1alpha1.ProbeRunStatus) bool {
	if a.Phase != b.Phase || a.NodeCount != b.NodeCount || a.Passed != b.Passed || a.Failed != b.Failed ||
		a.ObservedGeneration != b.ObservedGeneration || a.Checks != b.Checks || len(a.Conditions) != len(b.Conditions) ||
		(a.StartTime == nil) != (b.StartTime == nil) {
		return false
	}
	for i := range a.Nodes {
		if a.Nodes[i].Node != b.Nodes[i].Node || a.Nodes[i].Done != b.Nodes[i].Done {
			return false
		}
	}
	for _, c := range b.Conditions {
		o := meta.FindStatusCondition(a.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message {
			return false
		}
	}
	return true
}

package proberunctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/proberun"
)

// LabelRun names the run a record belongs to (the dispatcher's run ID): a run
// over more than v1alpha1.MaxRecordNodes nodes has several records.
const LabelRun = "faultline.io/run"

// DefaultFlush is how often, at most, a record's status is written while its run
// goes on; its last node is written at once.
const DefaultFlush = 2 * time.Second

// maxRecordRetries: a record the API server keeps refusing (no CRD, no RBAC) is
// given up after this many tries (about 20s), so records never pile up in memory.
const maxRecordRetries = 12

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	Client kubernetes.Interface
	// Identity is this replica: the records' annotation and their status's owner.
	Identity string
	// MaxResults bounds a record: at most this many nodes × checks, one node at
	// least (default v1alpha1.MaxRecordResults).
	MaxResults int
	// Flush: see DefaultFlush.
	Flush time.Duration
	Log   *slog.Logger
}

// Recorder records the runs a replica starts itself (a rule's confirmation, a
// recovery, a scheduled round, an escalation step, the deep checks) as
// ProbeRun objects, so that every run is one `kubectl get proberuns`. The runs go
// on as before, with the controller's latency; a record follows them: created when
// the run starts, its status written as nodes end (at most every Flush), through
// one queue, one sync of a record at a time: the replica that runs it is its only
// writer. A run over more nodes than MaxResults allows is split into several
// records. The records of the fleet-wide rounds (schedule, deep) keep of a node
// that passed its verdict and each check's status and duration only: a round
// over 20,000 nodes is then some 6 MiB in etcd, not 47 (TestRecordSize).
type Recorder struct {
	cfg RecorderConfig
	rc  rest.Interface
	q   workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	parts  map[string]*part             // by key: run ID/index
	byNode map[string]map[string]string // run ID → node → key
}

// part is one record of a run: its nodes and what they found so far.
type part struct {
	run     string
	spec    v1alpha1.ProbeRunSpec
	targets []string
	results map[string]proberun.NodeRun
	obj     *v1alpha1.ProbeRun // as last written; nil until created
}

// NewRecorder returns a Recorder; Run writes its records.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if cfg.Client == nil {
		return nil, errors.New("proberunctl: recorder: client required")
	}
	if cfg.MaxResults <= 0 {
		cfg.MaxResults = v1alpha1.MaxRecordResults
	}
	if cfg.Flush <= 0 {
		cfg.Flush = DefaultFlush
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	rc, err := v1alpha1.NewRESTClient(cfg.Client)
	if err != nil {
		return nil, fmt.Errorf("proberunctl: recorder: %w", err)
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "proberun-records"})
	return &Recorder{cfg: cfg, rc: rc, q: q, parts: map[string]*part{}, byNode: map[string]map[string]string{}}, nil
}

// Started notes a run that starts: its records are created at once.
func (r *Recorder) Started(run proberun.Run) {
	nodes := make([]string, 0, len(run.Nodes))
	for _, nr := range run.Nodes {
		nodes = append(nodes, nr.Node)
	}
	trig := run.Trigger
	if trig == "" {
		trig = proberun.TriggerManual
	}
	reason := run.Reason
	if len(reason) > 512 {
		reason = reason[:512]
	}
	var params map[string]map[string]string
	for c, p := range run.Params {
		if params == nil {
			params = map[string]map[string]string{}
		}
		params[c] = maps.Clone(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byNode[run.ID] = map[string]string{}
	for i, chunk := range split(nodes, max(1, r.cfg.MaxResults/max(1, len(run.Checks)))) {
		key := fmt.Sprintf("%s/%d", run.ID, i)
		spec := v1alpha1.ProbeRunSpec{Checks: slices.Clone(run.Checks), Params: params, Force: run.Force,
			Trigger: string(trig), Reason: reason}
		for _, n := range chunk {
			if n != proberun.ClusterNode {
				spec.Nodes = append(spec.Nodes, n)
			}
			r.byNode[run.ID][n] = key
		}
		r.parts[key] = &part{run: run.ID, spec: spec, targets: chunk, results: map[string]proberun.NodeRun{}}
		r.q.Add(key)
	}
}

// NodeDone notes a node's part of a run once it ended.
func (r *Recorder) NodeDone(run proberun.Run, nr proberun.NodeRun) {
	r.mu.Lock()
	key, ok := r.byNode[run.ID][nr.Node]
	p := r.parts[key]
	last := false
	if ok && p != nil {
		if compact(run.Trigger) {
			nr = brief(nr)
		}
		p.results[nr.Node] = nr
		last = len(p.results) == len(p.targets)
	}
	r.mu.Unlock()
	switch {
	case p == nil:
	case last:
		r.q.Add(key)
	default:
		r.q.AddAfter(key, r.cfg.Flush)
	}
}

// Run writes the records until ctx ends (the replica's lifetime).
func (r *Recorder) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.q.ShutDown()
	}()
	for {
		key, quit := r.q.Get()
		if quit {
			return
		}
		err := r.sync(ctx, key)
		switch {
		case err == nil:
			r.q.Forget(key)
		case ctx.Err() != nil:
		case r.q.NumRequeues(key) >= maxRecordRetries:
			r.cfg.Log.Warn("probe run record given up", "record", key, "err", err)
			r.drop(key)
			r.q.Forget(key)
		default:
			if !apierrors.IsConflict(err) {
				r.cfg.Log.Warn("probe run record: write failed, retrying", "record", key, "err", err)
			}
			r.q.AddRateLimited(key)
		}
		r.q.Done(key)
	}
}

// sync creates a record, or writes what its run found since its last write.
func (r *Recorder) sync(ctx context.Context, key string) error {
	r.mu.Lock()
	p := r.parts[key]
	if p == nil {
		r.mu.Unlock()
		return nil
	}
	targets, results, obj, spec := p.targets, maps.Clone(p.results), p.obj, p.spec
	r.mu.Unlock()
	if obj == nil {
		trig := spec.Trigger
		obj = &v1alpha1.ProbeRun{}
		err := r.rc.Post().Resource(v1alpha1.ProbeRunResource).Body(&v1alpha1.ProbeRun{
			ObjectMeta: metav1.ObjectMeta{GenerateName: trig + "-", Labels: map[string]string{LabelRun: p.run},
				Annotations: map[string]string{v1alpha1.AnnotationRecord: r.cfg.Identity}},
			Spec: spec}).Do(ctx).Into(obj)
		if err != nil {
			return fmt.Errorf("record of probe run %s: create: %w", p.run, err)
		}
		r.keep(key, obj)
	}
	pr := obj.DeepCopy()
	fill(pr, targets, results, v1alpha1.ReasonStarted, r.cfg.Identity)
	if !equalStatus(&obj.Status, &pr.Status) {
		pr.Status.Owner = r.cfg.Identity
		out := &v1alpha1.ProbeRun{}
		err := r.rc.Put().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).SubResource("status").Body(pr).Do(ctx).Into(out)
		switch {
		case apierrors.IsNotFound(err): // deleted meanwhile: nothing more to record
			r.drop(key)
			return nil
		case apierrors.IsConflict(err):
			if gerr := r.rc.Get().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).Do(ctx).Into(out); gerr == nil {
				r.keep(key, out)
			}
			return err
		case err != nil:
			return fmt.Errorf("record of probe run %s (%s): status: %w", p.run, pr.Name, err)
		}
		obj = out
	}
	if obj.Status.Phase == v1alpha1.ProbeRunCompleted {
		r.drop(key)
		return nil
	}
	r.keep(key, obj)
	return nil
}

func (r *Recorder) keep(key string, obj *v1alpha1.ProbeRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[key]; p != nil {
		p.obj = obj
	}
}

// drop forgets a record (and its run, once it has no record left).
func (r *Recorder) drop(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[key]
	if p == nil {
		return
	}
	delete(r.parts, key)
	left := false
	for n, k := range r.byNode[p.run] {
		if k == key {
			delete(r.byNode[p.run], n)
		} else {
			left = true
		}
	}
	if !left {
		delete(r.byNode, p.run)
	}
}

// compact reports whether the records of a trigger's runs keep only the
// verdicts of the nodes that passed: the rounds over the whole fleet.
func compact(trig proberun.Trigger) bool {
	return trig == proberun.TriggerSchedule || trig == proberun.TriggerDeep
}

// brief is a node's part as a compact record keeps it: all of it when a check
// did not pass, else each check's status, start and duration.
func brief(nr proberun.NodeRun) proberun.NodeRun {
	if nr.Status != probe.StatusPass || nr.Error != "" || len(nr.NotRun) > 0 {
		return nr
	}
	out := nr
	out.Results = make([]probe.Result, len(nr.Results))
	for i, r := range nr.Results {
		out.Results[i] = probe.Result{Check: r.Check, Status: r.Status, Started: r.Started, Duration: r.Duration}
	}
	return out
}

// split cuts nodes into chunks of at most max, in order.
func split(nodes []string, max int) [][]string {
	var out [][]string
	for len(nodes) > max {
		out = append(out, nodes[:max:max])
		nodes = nodes[max:]
	}
	return append(out, nodes)
}

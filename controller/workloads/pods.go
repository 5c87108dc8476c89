// Package workloads tells which jobs a fault touched: the pods that hold a node's
// GPUs, from a slim informer of the cluster's GPU pods, with their top owners
// (Deployment, CronJob, JobSet, PyTorchJob, ...), recorded in the fault's NodeFault
// when it is first recorded, and a Warning Event on each such pod (Recorded).
//
// The pods come from the API server, not from the node's kubelet (the probe agent's
// PodResources view): a faulty node's agent is often down or unreachable when the
// fault is recorded, and the API server knows the pods regardless.
package workloads

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// MaxPods bounds the pods a record lists and the Events one fault posts.
const MaxPods = 20

// Defaults of Options.
const (
	DefaultEventQPS   = 5
	DefaultEventBurst = 200
)

// boundUnfinished selects the pods bound to a node that have not finished: a
// finished pod holds no GPU, and leaves the watch (a delete) when it finishes.
const boundUnfinished = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

// byNode indexes the GPU pods by their node.
const byNode = "node"

// Options configure a Tracker.
type Options struct {
	// Post posts an Event on an object (the Actor's recorder, with its spam filter).
	Post func(object runtime.Object, eventType, reason, message string) error
	// EventQPS and EventBurst bound the Events on pods across all faults (defaults
	// DefaultEventQPS and DefaultEventBurst): past them an Event is dropped and
	// counted, the record still lists its pod. An incident on a thousand nodes
	// posts its first EventBurst Events at once, then EventQPS a second.
	EventQPS   float32
	EventBurst int
	// Events counts the Events on pods by result (posted, dropped, failed); nil:
	// not counted.
	Events *prometheus.CounterVec
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Tracker keeps the GPU pods of the cluster and their owners. Create it with New,
// run it with Run; it implements nodefault.Workloads.
type Tracker struct {
	opts    Options
	inf     cache.SharedIndexInformer
	owners  *owners
	limiter flowcontrol.RateLimiter
}

// New builds a Tracker on client; nothing runs until Run.
func New(client kubernetes.Interface, opts Options) (*Tracker, error) {
	if opts.Post == nil {
		return nil, fmt.Errorf("workloads: no Event poster")
	}
	if opts.EventQPS <= 0 {
		opts.EventQPS = DefaultEventQPS
	}
	if opts.EventBurst <= 0 {
		opts.EventBurst = DefaultEventBurst
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = boundUnfinished
			l, err := pods.List(context.Background(), o)
			if err != nil {
				return nil, err
			}
			keep := l.Items[:0]
			for _, p := range l.Items {
				if GPUs(&p) > 0 {
					keep = append(keep, p)
				}
			}
			clear(l.Items[len(keep):]) // the other pods' objects go with this page
			l.Items = keep
			return l, nil
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = boundUnfinished
			w, err := pods.Watch(context.Background(), o)
			if err != nil {
				return nil, err
			}
			// A pod's GPU requests never change: a pod without any is never cached,
			// so none of its events matter. Bookmarks and errors pass.
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				p, ok := e.Object.(*corev1.Pod)
				return e, !ok || e.Type == watch.Bookmark || GPUs(p) > 0
			}), nil
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{byNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*gpuPod); ok {
			return []string{p.node}, nil
		}
		return nil, nil
	}})
	if err := inf.SetTransform(slim); err != nil {
		return nil, fmt.Errorf("workloads: pod informer: %w", err)
	}
	t := &Tracker{opts: opts, inf: inf, owners: newOwners(client),
		limiter: flowcontrol.NewTokenBucketRateLimiter(opts.EventQPS, opts.EventBurst)}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if p, ok := obj.(*gpuPod); ok && p.owner != nil {
			t.owners.learn(p.namespace, *p.owner)
		}
	}}); err != nil {
		return nil, fmt.Errorf("workloads: pod informer: %w", err)
	}
	return t, nil
}

// Run runs the pod informer and the owners' lookups until ctx is done.
func (t *Tracker) Run(ctx context.Context) {
	go t.owners.run(ctx)
	t.inf.Run(ctx.Done())
}

// HasSynced reports whether the first list of the GPU pods is in.
func (t *Tracker) HasSynced() bool { return t.inf.HasSynced() }

// gpuPod is what the cache keeps of a GPU pod: a few hundred bytes, where a
// decoded Pod takes tens of kilobytes.
type gpuPod struct {
	namespace, name string
	uid             types.UID
	node            string
	gpus            int32
	owner           *ref // its controller owner reference
}

// GetObjectMeta gives the cache the pod's key.
func (p *gpuPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, UID: p.uid}
}

// slim turns a Pod into its gpuPod (one already slim passes as it is).
func slim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &gpuPod{namespace: p.Namespace, name: p.Name, uid: p.UID, node: p.Spec.NodeName, gpus: int32(min(GPUs(p), 1<<30))}
	if c := metav1.GetControllerOfNoCopy(p); c != nil {
		out.owner = &ref{apiVersion: c.APIVersion, kind: c.Kind, name: c.Name, uid: c.UID}
	}
	return out, nil
}

// GPUs is the number of GPUs (nvidia.com/gpu) and MIG slices (nvidia.com/mig-*)
// the pod holds: its containers' and sidecars' requests, or its largest init
// container's when that is more. A limit alone counts (it is the request then).
func GPUs(p *corev1.Pod) int64 {
	var app, init int64
	for _, c := range p.Spec.Containers {
		app += gpusOf(c.Resources)
	}
	for _, c := range p.Spec.InitContainers {
		n := gpusOf(c.Resources)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			app += n // a sidecar runs beside the containers
		} else {
			init = max(init, n)
		}
	}
	return max(app, init)
}

func gpusOf(r corev1.ResourceRequirements) int64 {
	var n int64
	for name, q := range r.Limits {
		if isGPU(name) {
			req := r.Requests[name]
			n += max(q.Value(), req.Value())
		}
	}
	for name, q := range r.Requests {
		if _, limited := r.Limits[name]; isGPU(name) && !limited {
			n += q.Value()
		}
	}
	return n
}

func isGPU(name corev1.ResourceName) bool {
	return name == "nvidia.com/gpu" || strings.HasPrefix(string(name), "nvidia.com/mig-")
}

// OnNode lists the pods holding node's GPUs now (at most MaxPods, sorted by
// namespace and name, with the count of the others), with their top owners; nil
// until the informer has synced.
func (t *Tracker) OnNode(node string) *v1alpha1.AffectedPods {
	if !t.inf.HasSynced() {
		return nil
	}
	objs, _ := t.inf.GetIndexer().ByIndex(byNode, node)
	pods := make([]*gpuPod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*gpuPod); ok {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].namespace != pods[j].namespace {
			return pods[i].namespace < pods[j].namespace
		}
		return pods[i].name < pods[j].name
	})
	out := &v1alpha1.AffectedPods{Time: metav1.NewTime(t.opts.Now())}
	if len(pods) > MaxPods {
		out.Omitted = int32(len(pods) - MaxPods)
		pods = pods[:MaxPods]
	}
	for _, p := range pods {
		ap := v1alpha1.AffectedPod{Namespace: p.namespace, Name: p.name, UID: string(p.uid), GPUs: p.gpus}
		if top := t.owners.top(p.owner); top != nil {
			ap.Owner = &v1alpha1.WorkloadRef{APIVersion: top.apiVersion, Kind: top.kind, Name: top.name}
		}
		out.Pods = append(out.Pods, ap)
	}
	return out
}

package workloads

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/lru"
)

// ref is an owner reference: what a record names of a workload.
type ref struct {
	apiVersion, kind, name string
	uid                    types.UID
}

// Bounds of the owners' walk and memory.
const (
	// maxDepth bounds the walk from a pod's owner up (Job → CronJob is one step).
	maxDepth = 3
	// maxOwners bounds the owners remembered: one per ReplicaSet and Job of a GPU
	// pod, not one per pod.
	maxOwners = 50000
	// maxTries bounds the lookups of one owner that fail (other than NotFound).
	maxTries = 5
	// lookupTimeout bounds one lookup.
	lookupTimeout = 10 * time.Second
)

// owners walks pods' owner references up to their top controller where the
// intermediate owner is a built-in kind whose own owner reference a GET reads:
// ReplicaSet (→ Deployment, or whatever controls it) and Job (→ CronJob, JobSet,
// MPIJob, ...). Any other kind (PyTorchJob, RayCluster, ...) is the top, named as
// the reference names it, without reading its resource. The lookups run in the
// background when a pod is first seen, once per owner, so a fault's record reads
// memory only; an owner not looked up yet is its pod's top.
type owners struct {
	client kubernetes.Interface
	// parents maps an owner's UID to its controller's reference (nil: it has none).
	parents *lru.Cache
	queue   workqueue.TypedRateLimitingInterface[lookup]
}

// lookup is an owner to look up, in its pod's namespace.
type lookup struct {
	namespace string
	owner     ref
}

func newOwners(client kubernetes.Interface) *owners {
	return &owners{client: client, parents: lru.New(maxOwners),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[lookup](),
			workqueue.TypedRateLimitingQueueConfig[lookup]{Name: "faultline_workload_owners"})}
}

// walked reports whether an owner of this kind has an owner reference worth a GET.
func walked(r ref) bool {
	return (r.kind == "ReplicaSet" && r.apiVersion == "apps/v1") || (r.kind == "Job" && r.apiVersion == "batch/v1")
}

// learn queues the lookup of owner r (of a pod in namespace) unless it is known.
func (o *owners) learn(namespace string, r ref) {
	if walked(r) && !o.known(r.uid) {
		o.queue.Add(lookup{namespace: namespace, owner: r})
	}
}

// known reports whether the owner uid was looked up.
func (o *owners) known(uid types.UID) bool {
	_, ok := o.parents.Get(uid)
	return ok
}

// run looks owners up, one at a time, until ctx is done.
func (o *owners) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		o.queue.ShutDown()
	}()
	for {
		l, quit := o.queue.Get()
		if quit {
			return
		}
		o.resolve(ctx, l)
		o.queue.Done(l)
	}
}

// resolve reads owner l's own controller reference and remembers it, then learns
// that parent in turn.
func (o *owners) resolve(ctx context.Context, l lookup) {
	if o.known(l.owner.uid) {
		o.queue.Forget(l)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	var meta *metav1.ObjectMeta
	var err error
	switch l.owner.kind {
	case "ReplicaSet":
		rs, e := o.client.AppsV1().ReplicaSets(l.namespace).Get(ctx, l.owner.name, metav1.GetOptions{})
		if e == nil {
			meta = &rs.ObjectMeta
		}
		err = e
	case "Job":
		j, e := o.client.BatchV1().Jobs(l.namespace).Get(ctx, l.owner.name, metav1.GetOptions{})
		if e == nil {
			meta = &j.ObjectMeta
		}
		err = e
	}
	switch {
	case apierrors.IsNotFound(err):
		o.parents.Add(l.owner.uid, (*ref)(nil)) // gone: it stays the top
	case err != nil:
		if o.queue.NumRequeues(l) < maxTries {
			o.queue.AddRateLimited(l)
			return
		}
		utilruntime.HandleError(err)
	case meta.UID != l.owner.uid:
		o.parents.Add(l.owner.uid, (*ref)(nil)) // another object of that name now
	default:
		var parent *ref
		if c := metav1.GetControllerOfNoCopy(meta); c != nil {
			parent = &ref{apiVersion: c.APIVersion, kind: c.Kind, name: c.Name, uid: c.UID}
			o.learn(l.namespace, *parent)
		}
		o.parents.Add(l.owner.uid, parent)
	}
	o.queue.Forget(l)
}

// top is the top controller of owner r as far as it is known; nil for nil.
func (o *owners) top(r *ref) *ref {
	for range maxDepth {
		if r == nil {
			return nil
		}
		v, ok := o.parents.Get(r.uid)
		parent, _ := v.(*ref)
		if !ok || parent == nil {
			return r
		}
		r = parent
	}
	return r
}

package act

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/controller/fault"
)

// defaultNodeListPage is how many Nodes one list request of the Node informer asks
// for.
const defaultNodeListPage = 500

// newNodeInformer is the Node informer (of the shard), its cache stripped to what
// faultline reads (stripNode). Its list is read in pages, each page stripped before
// the next is read: a list served at once from the apiserver's watch cache (what an
// informer asks for by default) holds every whole Node of the fleet, and its body,
// in memory at the same time, and the process keeps that peak long after the list.
func newNodeInformer(client kubernetes.Interface, o Options) (cache.SharedIndexInformer, error) {
	nodes := client.CoreV1().Nodes()
	lw := &cache.ListWatch{
		ListFunc: func(lo metav1.ListOptions) (runtime.Object, error) {
			o.shardListOptions(&lo)
			return listStripped(context.Background(), nodes, lo, cmp.Or(o.nodeListPage, defaultNodeListPage))
		},
		WatchFunc: func(lo metav1.ListOptions) (watch.Interface, error) {
			o.shardListOptions(&lo)
			return nodes.Watch(context.Background(), lo)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.Node{}, cache.SharedIndexInformerOptions{ResyncPeriod: o.Resync})
	if err := inf.SetTransform(stripNode); err != nil {
		return nil, fmt.Errorf("act: node informer: %w", err)
	}
	return inf, nil
}

// listStripped lists the Nodes lo selects, pageSize at a time from a consistent
// snapshot (the first page's resourceVersion: what the watch then starts from).
func listStripped(ctx context.Context, nodes typedcorev1.NodeInterface, lo metav1.ListOptions, pageSize int64) (*corev1.NodeList, error) {
	// Pages need a consistent read: the watch cache (resourceVersion "0") would
	// ignore the limit and send everything at once.
	lo.ResourceVersion, lo.ResourceVersionMatch, lo.Limit, lo.Continue = "", "", pageSize, ""
	out := &corev1.NodeList{}
	for {
		page, err := nodes.List(ctx, lo)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for i := range page.Items {
			if _, err := stripNode(&page.Items[i]); err != nil {
				return nil, err
			}
		}
		// Copied out of the page: the page's whole Nodes are garbage from here on.
		out.Items = append(out.Items, page.Items...)
		out.ResourceVersion = page.ResourceVersion
		if page.Continue == "" {
			return out, nil
		}
		lo.Continue = page.Continue
	}
}

// GPUResource is the extended resource of the node's GPUs (NVIDIA's device plugin).
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// stripNode is the Node informer's transform: the cache keeps what faultline reads,
// so that its memory follows the number of nodes, not the size of their metadata and
// status. Kept: the metadata less its managed fields and less the annotations of
// others (cachedAnnotation), the spec, the boot ID (recover: reboot), faultline's
// condition (compared before each condition patch) and the GPU capacity (the GPUs a
// scheduled nvml check expects). The rest of the status (the kubelet's conditions,
// other capacity, addresses, images, system info) is dropped. Nothing cached is
// written back whole: a Node write is a patch of what faultline changes
// (nodepatch.go), and its status only ever a patch of its own conditions.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Labels, n.Annotations = internStrings(n.Labels), internStrings(cachedAnnotations(n.Annotations))
	var conds []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == fault.ConditionType {
			conds = append(conds, c)
		}
	}
	var capacity corev1.ResourceList
	if q, ok := n.Status.Capacity[GPUResource]; ok {
		capacity = gpuCapacity(q)
	}
	n.Status = corev1.NodeStatus{Conditions: conds, Capacity: capacity, NodeInfo: corev1.NodeSystemInfo{BootID: n.Status.NodeInfo.BootID}}
	return n, nil
}

// cachedAnnotations is the part of m the cache keeps (nil when none).
func cachedAnnotations(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if cachedAnnotation(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// internStrings is m with its keys and values shared with every other cached Node's
// (unique.Make): the nodes of a fleet carry the same label and annotation keys and
// mostly the same values (GPU product, zone, NFD's feature lists), each decoded into
// a string of its own. Shared, they cost once, and the cache's memory follows the
// number of nodes by their maps alone.
func internStrings(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[unique.Make(k).Value()] = unique.Make(v).Value()
	}
	return out
}

// gpuCapacities holds one ResourceList per GPU count seen, shared by the cached Nodes
// of that count: a map of one entry is hundreds of bytes, a fleet has a few counts,
// and cached objects are never modified (a write starts from a DeepCopy). Counts past
// maxSharedCapacities get lists of their own: a node reports its capacity, so the
// number of distinct counts is not for the controller to bound.
var gpuCapacities = struct {
	sync.Mutex
	m map[string]corev1.ResourceList
}{m: map[string]corev1.ResourceList{}}

const maxSharedCapacities = 64

func gpuCapacity(q resource.Quantity) corev1.ResourceList {
	k := q.String()
	gpuCapacities.Lock()
	defer gpuCapacities.Unlock()
	if l, ok := gpuCapacities.m[k]; ok {
		return l
	}
	l := corev1.ResourceList{GPUResource: q}
	if len(gpuCapacities.m) < maxSharedCapacities {
		gpuCapacities.m[k] = l
	}
	return l
}

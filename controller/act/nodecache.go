package act

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/controller/fault"
)

// defaultNodeListPage is how many Nodes one list request of the Node informer asks
// for.
const defaultNodeListPage = 500

// newNodeInformer is the Node informer (of the shard), its cache holding what
// faultline reads of each Node (cachedNode). Its list is read in pages, each page
// stripped before the next is read: a list served at once from the apiserver's watch cache (what an
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
			page.Items[i] = *cachedOf(&page.Items[i]).shared()
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

// cachedNode is what the Node cache keeps of a Node, in a type of its own: a
// corev1.Node is 736 bytes before any of its fields is set, this 128, and
// a fleet's Nodes are the cache's largest part. Kept: what faultline reads. The
// labels (selectors, eligibility, topology, opt-out; their strings shared with every
// other entry's), faultline's own annotations (cachedAnnotation), the taints, the boot
// ID (recover: reboot), faultline's condition (compared before each condition patch)
// and the GPU capacity (the GPUs a scheduled nvml check expects). Nothing cached is
// written back whole: a Node write is a patch of what faultline changes
// (nodepatch.go), and its status only ever a patch of its own conditions.
type cachedNode struct {
	name, rv      string
	uid           types.UID
	labels        map[string]string
	annotations   map[string]string
	taints        []corev1.Taint
	unschedulable bool
	bootID        string
	condition     *corev1.NodeCondition // faultline's, when the Node has it
	capacity      corev1.ResourceList   // the GPUs alone, shared (gpuCapacity)
}

// GetObjectMeta names the entry for the informer's store (Nodes have no namespace).
func (c *cachedNode) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: c.name, UID: c.uid, ResourceVersion: c.rv}
}

// node is the entry as a Node of its own, which the caller may change.
func (c *cachedNode) node() *corev1.Node {
	n := c.shared()
	n.Labels, n.Annotations = maps.Clone(n.Labels), maps.Clone(n.Annotations)
	n.Spec.Taints = slices.Clone(n.Spec.Taints)
	for i := range n.Spec.Taints {
		n.Spec.Taints[i].TimeAdded = n.Spec.Taints[i].TimeAdded.DeepCopy()
	}
	n.Status.Capacity = n.Status.Capacity.DeepCopy()
	return n
}

// shared is the entry as a Node that shares its maps and slices with the cache.
func (c *cachedNode) shared() *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.name, UID: c.uid, ResourceVersion: c.rv, Labels: c.labels, Annotations: c.annotations},
		Spec:   corev1.NodeSpec{Taints: c.taints, Unschedulable: c.unschedulable},
		Status: corev1.NodeStatus{Capacity: c.capacity, NodeInfo: corev1.NodeSystemInfo{BootID: c.bootID}}}
	if c.condition != nil {
		n.Status.Conditions = []corev1.NodeCondition{*c.condition}
	}
	return n
}

// optedOut: the node is labelled fault.LabelOptOut=true.
func (c *cachedNode) optedOut() bool { return optedOut(c.labels) }

// stripNode is the Node informer's transform: a Node becomes its cachedNode (an
// entry already transformed, or a tombstone, passes as it is).
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return cachedOf(n), nil
}

func cachedOf(n *corev1.Node) *cachedNode {
	c := &cachedNode{name: n.Name, rv: n.ResourceVersion, uid: n.UID,
		labels: internStrings(n.Labels), annotations: internStrings(cachedAnnotations(n.Annotations)),
		taints: n.Spec.Taints, unschedulable: n.Spec.Unschedulable, bootID: n.Status.NodeInfo.BootID}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == fault.ConditionType {
			cond := n.Status.Conditions[i]
			c.condition = &cond
		}
	}
	if q, ok := n.Status.Capacity[GPUResource]; ok {
		c.capacity = gpuCapacity(q)
	}
	return c
}

// NodeCache reads the Node informer's cache.
type NodeCache struct{ store cache.Store }

func (nc NodeCache) get(name string) (*cachedNode, bool) {
	o, ok, _ := nc.store.GetByKey(name) // cluster-scoped: the key is the name
	c, _ := o.(*cachedNode)
	return c, ok && c != nil
}

// Get returns the cached Node name, holding what the cache keeps (cachedNode), as a
// Node of its own: the caller may change it. NotFound when the cache has none.
func (nc NodeCache) Get(name string) (*corev1.Node, error) {
	c, ok := nc.get(name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("node"), name)
	}
	return c.node(), nil
}

// Names returns the names of the cached Nodes whose labels sel matches, sorted.
func (nc NodeCache) Names(sel labels.Selector) []string {
	var out []string
	for _, o := range nc.store.List() {
		if c, ok := o.(*cachedNode); ok && sel.Matches(labels.Set(c.labels)) {
			out = append(out, c.name)
		}
	}
	slices.Sort(out)
	return out
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

package act

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/liveheap"
)

// kubeletNode is a Node as a kubelet reports one: the whole status, a pod CIDR,
// annotations of other components.
func kubeletNode(name string) *corev1.Node {
	gpus := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("128"), "nvidia.com/gpu": resource.MustParse("8")}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.present": "true"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "csi.volume.kubernetes.io/nodeid": `{"x":"y"}`}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.7.0/24", PodCIDRs: []string{"10.244.7.0/24"}, ProviderID: "kwok://" + name},
		Status: corev1.NodeStatus{
			Capacity: gpus, Allocatable: gpus,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{BootID: "boot-" + name, MachineID: "m", SystemUUID: "u", KernelVersion: "6.8.0",
				OSImage: "Ubuntu 24.04 LTS", ContainerRuntimeVersion: "containerd://2.0", KubeletVersion: "v1.32.0",
				OperatingSystem: "linux", Architecture: "amd64"},
			Images: []corev1.ContainerImage{{Names: []string{"nvcr.io/nvidia/driver:570"}, SizeBytes: 1 << 30}},
		},
	}
}

// testCacheStripped: the Node cache keeps what faultline reads (labels, its own
// annotations, spec, the boot ID, faultline's condition, the GPU capacity) and drops
// the rest; the writes made from a cached copy (taint, untaint, label, condition)
// leave what was dropped (others' annotations, the status) and the spec as they were.
func testCacheStripped(t *testing.T, cfg *rest.Config) {
	ctx := context.Background()
	a, _ := startActor(t, cfg, Options{Condition: true})
	cs := a.client
	kn := kubeletNode("strip-1")
	kn.Annotations["faultline.io/note"] = "kept"
	orig, err := cs.CoreV1().Nodes().Create(ctx, kn, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitCached(t, a, "strip-1", orig.ResourceVersion)
	c, err := a.Nodes().Get("strip-1")
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-strip-1"},
		Capacity: corev1.ResourceList{GPUResource: resource.MustParse("8")}}
	if !reflect.DeepEqual(c.Status, want) || c.ManagedFields != nil {
		t.Fatalf("cached status %+v (managed fields %d), want only the boot ID and the GPU capacity", c.Status, len(c.ManagedFields))
	}
	if !reflect.DeepEqual(c.Labels, orig.Labels) || c.Name != orig.Name || c.UID != orig.UID ||
		!reflect.DeepEqual(c.Spec, corev1.NodeSpec{Taints: orig.Spec.Taints, Unschedulable: orig.Spec.Unschedulable}) {
		t.Fatalf("cached metadata or spec differ: %+v %+v", c.ObjectMeta, c.Spec)
	}
	// A Node read from the cache is the caller's: changing it leaves the cache as it was.
	c.Labels["changed"], c.Status.Capacity[GPUResource] = "yes", resource.MustParse("1")
	if again, _ := a.Nodes().Get("strip-1"); again.Labels["changed"] != "" || again.Status.Capacity.Name(GPUResource, resource.DecimalSI).Value() != 8 {
		t.Fatalf("the cache changed with a Node read from it: %+v", again)
	}
	// Others' annotations are not cached; the writes below must keep them all the
	// same.
	if want := map[string]string{"faultline.io/note": "kept"}; !maps.Equal(c.Annotations, want) {
		t.Fatalf("cached annotations %v, want %v", c.Annotations, want)
	}

	// kept reports how the live Node's status, annotations or spec differ from
	// the original's, leaving out what faultline writes.
	kept := func(what string) *corev1.Node {
		t.Helper()
		n := getNode(t, cs, "strip-1")
		var ours *corev1.NodeCondition
		st := n.Status.DeepCopy()
		st.Conditions = nil
		for i, c := range n.Status.Conditions {
			if c.Type == fault.ConditionType {
				ours = &n.Status.Conditions[i]
			} else {
				st.Conditions = append(st.Conditions, c)
			}
		}
		if ours == nil {
			t.Fatalf("%s: no %s condition", what, fault.ConditionType)
		}
		if !reflect.DeepEqual(*st, orig.Status) {
			t.Fatalf("%s: status %+v, want %+v", what, *st, orig.Status)
		}
		for k, v := range orig.Annotations {
			if n.Annotations[k] != v {
				t.Fatalf("%s: annotation %s = %q, want %q", what, k, n.Annotations[k], v)
			}
		}
		if n.Spec.PodCIDR != orig.Spec.PodCIDR || n.Spec.ProviderID != orig.Spec.ProviderID {
			t.Fatalf("%s: spec %+v", what, n.Spec)
		}
		return n
	}
	xid := rule("nvidia-xid", "xid-gpu-lost", rules.DefaultTaintKey, "xid-gpu-lost")
	res, err := a.TaintNode(ctx, xidFault("strip-1", xid, time.Now()), "")
	if err != nil || !res.Changed || !res.Condition {
		t.Fatalf("taint: %+v, %v", res, err)
	}
	n := kept("after the taint")
	if !hasTaint(n, "faultline.io/faulty=xid-gpu-lost:NoSchedule") {
		t.Fatalf("taints %v", n.Spec.Taints)
	}
	// The cache holds faultline's condition: a repeat writes nothing.
	waitCached(t, a, "strip-1", n.ResourceVersion)
	if res, err := a.TaintNode(ctx, xidFault("strip-1", xid, time.Now()), ""); err != nil || res.Changed || res.Condition {
		t.Fatalf("repeat: %+v, %v", res, err)
	}
	waitCached(t, a, "strip-1", n.ResourceVersion)
	if changed, err := a.SetNodeMeta(ctx, "strip-1", map[string]string{LabelService: "required"}, nil); err != nil || !changed {
		t.Fatalf("label: %v, %v", changed, err)
	}
	if n := kept("after the label"); n.Labels[LabelService] != "required" {
		t.Fatalf("labels %v", n.Labels)
	}
	if _, err := a.UntaintNode(ctx, "strip-1", AllRules); err != nil {
		t.Fatal(err)
	}
	if n := kept("after the untaint"); hasTaint(n, "faultline.io/faulty=xid-gpu-lost:NoSchedule") {
		t.Fatalf("taints %v", n.Spec.Taints)
	}
}

// testListPaged: the Node informer's list comes in pages, each stripped, and the
// cache holds every Node of the cluster, as the API lists them, once it synced.
func testListPaged(t *testing.T, cfg *rest.Config) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := cs.CoreV1().Nodes().Create(ctx, kubeletNode(fmt.Sprintf("paged-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, wc := startActor(t, cfg, Options{nodeListPage: 2})
	if pages := int64(len(all.Items)+1) / 2; wc.lists.Load() < pages {
		t.Fatalf("%d list requests for %d nodes in pages of 2, want at least %d", wc.lists.Load(), len(all.Items), pages)
	}
	names := a.Nodes().Names(labels.Everything())
	if len(names) < len(all.Items) || !slices.IsSorted(names) {
		t.Fatalf("%d nodes cached, %d listed (names %v)", len(names), len(all.Items), names)
	}
	for _, name := range names {
		n, err := a.Nodes().Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, cpu := n.Status.Capacity[corev1.ResourceCPU]; len(n.Status.Addresses) > 0 || cpu || n.ManagedFields != nil {
			t.Fatalf("node %s cached whole: %+v", n.Name, n.Status)
		}
		if strings.HasPrefix(n.Name, "paged-") && n.Status.NodeInfo.BootID != "boot-"+n.Name {
			t.Fatalf("node %s: boot ID %q", n.Name, n.Status.NodeInfo.BootID)
		}
	}
}

// Two cached Nodes share their label strings, which keep their values; others'
// annotations are not kept.
func TestStripNodeSharesStrings(t *testing.T) {
	a, b := kubeletNode("share-1"), kubeletNode("share-2")
	// decoded Nodes hold strings of their own: make b's distinct from a's
	b.Labels = map[string]string{strings.Clone("nvidia.com/gpu.present"): strings.Clone("true")}
	want := maps.Clone(b.Labels)
	ca, cb := cachedOf(a), cachedOf(b)
	if !maps.Equal(cb.labels, want) || ca.annotations != nil {
		t.Fatalf("labels %v, annotations %v (others' annotations are not kept)", cb.labels, ca.annotations)
	}
	for k, v := range cb.labels {
		for ka, va := range ca.labels {
			if ka == k && (unsafe.StringData(ka) != unsafe.StringData(k) || unsafe.StringData(va) != unsafe.StringData(v)) {
				t.Errorf("label %s=%s is not shared between the nodes", k, v)
			}
		}
	}
}

// Cached Nodes of the same GPU count share one capacity list, which keeps the count.
func TestStripNodeSharesCapacity(t *testing.T) {
	a, b := kubeletNode("cap-1"), kubeletNode("cap-2")
	b.Status.Capacity = corev1.ResourceList{GPUResource: resource.MustParse("8")}
	ca, cb := cachedOf(a), cachedOf(b)
	if q := cb.capacity[GPUResource]; q.Value() != 8 || len(cb.capacity) != 1 {
		t.Fatalf("capacity %v", cb.capacity)
	}
	if reflect.ValueOf(ca.capacity).UnsafePointer() != reflect.ValueOf(cb.capacity).UnsafePointer() {
		t.Error("two nodes of 8 GPUs hold a capacity list each")
	}
}

// TestCacheEntriesSmall: a cached entry (cachedNode) holds a GPU node in well under
// the memory of a corev1.Node holding the same fields, the form the cache kept
// before: at 20,000 nodes the Node cache is the controller's largest part.
func TestCacheEntriesSmall(t *testing.T) {
	const n = 4000
	gpuNode := func(i int) *corev1.Node {
		node := kubeletNode(fmt.Sprintf("gpu-%05d", i))
		node.UID = types.UID(fmt.Sprintf("6f1c2a34-0000-4000-8000-%012d", i))
		node.ResourceVersion = fmt.Sprint(100000 + i)
		maps.Copy(node.Labels, map[string]string{"kubernetes.io/hostname": node.Name, "kubernetes.io/os": "linux",
			"kubernetes.io/arch": "amd64", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"})
		return node
	}
	perNode := func(keep func(*corev1.Node) any) float64 {
		held := make([]any, n)
		before := liveheap.Bytes()
		for i := range held {
			held[i] = keep(gpuNode(i))
		}
		after := liveheap.Bytes()
		runtime.KeepAlive(held)
		return float64(after-before) / n
	}
	asNode := perNode(func(node *corev1.Node) any { return cachedOf(node).shared() })
	entry := perNode(func(node *corev1.Node) any { return cachedOf(node) })
	t.Logf("bytes a node: %.0f as a cachedNode, %.0f as a corev1.Node of the same fields (%.2f×)", entry, asNode, asNode/entry)
	if entry > 0.75*asNode {
		t.Errorf("a cached entry costs %.0f bytes, a corev1.Node of the same fields %.0f: want at most three quarters", entry, asNode)
	}
}

package act

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
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
	c, err := a.NodeLister().Get("strip-1")
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-strip-1"},
		Capacity: corev1.ResourceList{GPUResource: resource.MustParse("8")}}
	if !reflect.DeepEqual(c.Status, want) || c.ManagedFields != nil {
		t.Fatalf("cached status %+v (managed fields %d), want only the boot ID and the GPU capacity", c.Status, len(c.ManagedFields))
	}
	if !reflect.DeepEqual(c.Labels, orig.Labels) || !reflect.DeepEqual(c.Spec, orig.Spec) {
		t.Fatalf("cached metadata or spec differ: %+v %+v", c.ObjectMeta, c.Spec)
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
	cached, err := a.NodeLister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(cached) < len(all.Items) {
		t.Fatalf("%d nodes cached, %d listed", len(cached), len(all.Items))
	}
	for _, n := range cached {
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
	for _, n := range []*corev1.Node{a, b} {
		if _, err := stripNode(n); err != nil {
			t.Fatal(err)
		}
	}
	if !maps.Equal(b.Labels, want) || a.Annotations != nil {
		t.Fatalf("labels %v, annotations %v (others' annotations are not kept)", b.Labels, a.Annotations)
	}
	for k, v := range b.Labels {
		for ka, va := range a.Labels {
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
	for _, n := range []*corev1.Node{a, b} {
		if _, err := stripNode(n); err != nil {
			t.Fatal(err)
		}
	}
	if q := b.Status.Capacity[GPUResource]; q.Value() != 8 || len(b.Status.Capacity) != 1 {
		t.Fatalf("capacity %v", b.Status.Capacity)
	}
	if reflect.ValueOf(a.Status.Capacity).UnsafePointer() != reflect.ValueOf(b.Status.Capacity).UnsafePointer() {
		t.Error("two nodes of 8 GPUs hold a capacity list each")
	}
}

package proberun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

const agentSelector = "app.kubernetes.io/name=faultline,app.kubernetes.io/component=probe-agent"

var agentLabels = map[string]string{"app.kubernetes.io/name": "faultline", "app.kubernetes.io/component": "probe-agent"}

// agentPod is a pod as the apiserver holds it; no kubelet runs it, so the test
// writes its status as a kubelet would.
type agentPod struct {
	ns, name, node string
	labels         map[string]string
	phase          corev1.PodPhase
	ready          bool
	ip             string
}

func putPod(t *testing.T, cs kubernetes.Interface, p agentPod) {
	t.Helper()
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(p.ns).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		pod, err = cs.CoreV1().Pods(p.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: p.labels},
			Spec: corev1.PodSpec{NodeName: p.node, ServiceAccountName: "agent", HostNetwork: true,
				Containers: []corev1.Container{{Name: "probe-agent", Image: "faultline-probe-agent"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", p.name, err)
		}
	}
	ready := corev1.ConditionFalse
	if p.ready {
		ready = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{Phase: p.phase, PodIP: p.ip, PodIPs: nil,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}
	if p.ip != "" {
		pod.Status.PodIPs = []corev1.PodIP{{IP: p.ip}}
		pod.Status.HostIP = p.ip
	}
	if _, err := cs.CoreV1().Pods(p.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of pod %s: %v", p.name, err)
	}
}

// The controller calls a node only through the Running and Ready agent pod on it,
// at the address the apiserver holds for that pod; a manual run naming a node
// without one is refused before anything starts, naming the node.
func TestAgentPods(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	ctx := context.Background()
	for _, ns := range []string{"faultline", "elsewhere"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	other := map[string]string{"app.kubernetes.io/name": "faultline", "app.kubernetes.io/component": "impostor"}
	pods := []agentPod{
		{ns: "faultline", name: "agent-a", node: "gpu-a", labels: agentLabels, phase: corev1.PodRunning, ready: true, ip: "10.0.0.1"},
		{ns: "faultline", name: "agent-b", node: "gpu-b", labels: agentLabels, phase: corev1.PodPending},
		{ns: "faultline", name: "agent-c", node: "gpu-c", labels: agentLabels, phase: corev1.PodRunning, ready: false, ip: "10.0.0.3"},
		// Ready pods that are not the agent's: another label, another namespace.
		{ns: "faultline", name: "impostor-d", node: "gpu-d", labels: other, phase: corev1.PodRunning, ready: true, ip: "10.0.0.4"},
		{ns: "elsewhere", name: "agent-e", node: "gpu-e", labels: agentLabels, phase: corev1.PodRunning, ready: true, ip: "10.0.0.5"},
	}
	for _, p := range pods {
		putPod(t, cs, p)
	}

	ap, err := NewAgentPods(cs, "faultline", agentSelector, 9402)
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ap.Start(lctx)
	endpoint := func(node string) (string, error) {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return ap.Endpoint(c, node)
	}
	if u, err := endpoint("gpu-a"); err != nil || u != "https://10.0.0.1:9402" {
		t.Errorf("gpu-a: %q, %v; want its pod's address over https", u, err)
	}
	for _, node := range []string{"gpu-b", "gpu-c", "gpu-d", "gpu-e", "gpu-none"} {
		if u, err := endpoint(node); !errors.Is(err, ErrNoAgent) || !strings.Contains(err.Error(), node) {
			t.Errorf("%s: %q, %v; want ErrNoAgent naming the node", node, u, err)
		}
	}

	// The dispatcher refuses a manual run on a node without an agent, naming it.
	d, err := New(Config{Agents: AgentResolver{Pods: ap}})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Nodes: []string{"gpu-a", "gpu-c", "gpu-none"}, Checks: []string{"nvml"}}
	err = d.CheckAgents(ctx, req)
	if !errors.Is(err, ErrNoAgent) || !strings.Contains(err.Error(), "2 of 3 node(s) run no probe agent, nothing started: gpu-c, gpu-none") {
		t.Errorf("CheckAgents: %v", err)
	}
	if err := d.CheckAgents(ctx, Request{Nodes: []string{"gpu-a"}, Checks: []string{"nvml"}}); err != nil {
		t.Errorf("CheckAgents with an agent: %v", err)
	}

	// The agent pods follow the kubelet's view: gpu-c turns Ready, gpu-a's pod goes.
	putPod(t, cs, agentPod{ns: "faultline", name: "agent-c", node: "gpu-c", labels: agentLabels, phase: corev1.PodRunning, ready: true, ip: "10.0.0.3"})
	if err := cs.CoreV1().Pods("faultline").Delete(ctx, "agent-a", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "gpu-c's agent ready, gpu-a's gone", func() error {
		if u, err := endpoint("gpu-c"); err != nil || u != "https://10.0.0.3:9402" {
			return fmt.Errorf("gpu-c: %q, %v", u, err)
		}
		if u, err := endpoint("gpu-a"); !errors.Is(err, ErrNoAgent) {
			return fmt.Errorf("gpu-a: %q, %v", u, err)
		}
		return nil
	})

	// A static URL for a node comes first (local setups).
	r := AgentResolver{Static: map[string]string{"gpu-none": "https://127.0.0.1:1"}, Pods: ap}
	if u, err := r.Endpoint(ctx, "gpu-none"); err != nil || u != "https://127.0.0.1:1" {
		t.Errorf("static: %q, %v", u, err)
	}
	if _, err := (AgentResolver{}).Endpoint(ctx, "gpu-a"); !errors.Is(err, ErrNoAgent) {
		t.Errorf("no agents configured: %v", err)
	}
	if _, err := NewAgentPods(cs, "faultline", "", 9402); err == nil {
		t.Error("an empty selector (every pod) is accepted")
	}
}

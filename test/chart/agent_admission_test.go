package chart

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/test/eventually"
)

// TestProbeAgentAdmissionPolicy installs the chart's agent RBAC and its
// ValidatingAdmissionPolicy in a real apiserver. The agent's identity, with a token
// bound to a pod on gpu-a (what the kubelet mounts), may place and remove the
// faultline.io/probing:NoSchedule taint on gpu-a, and the real agent does so around
// an invasive probe; every other change to a Node is refused: another node, another
// taint, labels, annotations, cordoning, a token bound to no node. Other identities
// are not affected.
func TestProbeAgentAdmissionPolicy(t *testing.T) {
	env, objs := startWithPolicy(t, "faultline-probe-agent-nodes")
	ctx := context.Background()
	admin := env.Clientset()
	const sa = "faultline-probe-agent"
	role := get[rbacv1.ClusterRole](t, objs, "ClusterRole", "faultline-probe-agent")
	roleBinding := get[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "faultline-probe-agent")
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, roleBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	client := func(token string) kubernetes.Interface {
		cs, err := kubernetes.NewForConfig(env.RESTConfigForToken(token))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// PodToken creates the nodes gpu-a and gpu-b and a pod of the agent on each.
	onA := client(env.PodToken(t, "faultline", sa, "gpu-a", nil))
	env.PodToken(t, "faultline", sa, "gpu-b", nil)
	unbound := client(env.ServiceAccountToken(t, "faultline", sa))
	for _, name := range []string{"gpu-a", "gpu-b"} {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels = map[string]string{"team": "a"}
		n.Annotations = map[string]string{"owner": "infra"}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
		if _, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(cs kubernetes.Interface, node string, change func(n *corev1.Node)) error {
		return updateNode(t, admin, cs, metav1.UpdateOptions{}, node, change)
	}
	refused := func(what string, err error, why string) {
		t.Helper()
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), why) {
			t.Errorf("agent: %s: %v, want refused by the policy (%q)", what, err, why)
		}
	}
	probing := func(effect corev1.TaintEffect, value string) func(n *corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: agent.ProbingTaint.Key, Effect: effect, Value: value})
		}
	}
	eventually.True(t, 30*time.Second, "the policy refusing the agent's taint on another node", func() bool {
		return updateNode(t, admin, onA, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, "gpu-b", probing(corev1.TaintEffectNoSchedule, "")) != nil
	})
	const (
		ownNode   = "only the node it runs on"
		onlyTaint = "only the faultline.io/probing:NoSchedule taint"
		noOther   = "may not change a Node's labels"
	)
	refused("the probing taint on another node", update(onA, "gpu-b", probing(corev1.TaintEffectNoSchedule, "")), ownNode)
	refused("the probing taint with a token bound to no node", update(unbound, "gpu-a", probing(corev1.TaintEffectNoSchedule, "")), ownNode)
	refused("the probing taint as NoExecute", update(onA, "gpu-a", probing(corev1.TaintEffectNoExecute, "")), onlyTaint)
	refused("the probing taint with a value", update(onA, "gpu-a", probing(corev1.TaintEffectNoSchedule, "x")), onlyTaint)
	refused("the controller's taint", update(onA, "gpu-a", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "faultline.io/faulty", Effect: corev1.TaintEffectNoSchedule})
	}), onlyTaint)
	refused("remove a foreign taint", update(onA, "gpu-a", func(n *corev1.Node) { n.Spec.Taints = nil }), onlyTaint)
	refused("change a label", update(onA, "gpu-a", func(n *corev1.Node) { n.Labels["team"] = "b" }), noOther)
	refused("add a faultline.io label", update(onA, "gpu-a", func(n *corev1.Node) { n.Labels["faultline.io/health"] = "ok" }), noOther)
	refused("change an annotation", update(onA, "gpu-a", func(n *corev1.Node) { n.Annotations["owner"] = "me" }), noOther)
	refused("cordon", update(onA, "gpu-a", func(n *corev1.Node) { n.Spec.Unschedulable = true }), noOther)
	if err := onA.CoreV1().Nodes().Delete(ctx, "gpu-a", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("agent deleting its node: %v, want forbidden", err)
	}

	// The real agent, as the pod on gpu-a: it taints its node around an invasive
	// probe and removes a stale taint at start.
	reg := probe.NewRegistry()
	var tainted atomic.Bool
	reg.MustRegister(probe.Spec{Name: "stress", Help: "stress test", Invasive: true, New: func(probe.Config) probe.Probe {
		return probeFunc(func(ctx context.Context) (probe.Result, error) {
			n, err := admin.CoreV1().Nodes().Get(ctx, "gpu-a", metav1.GetOptions{})
			if err != nil {
				return probe.Result{}, err
			}
			tainted.Store(hasProbingTaint(n))
			return probe.Result{Status: probe.StatusPass}, nil
		})
	}})
	ag, err := agent.New(agent.Config{Node: "gpu-a", Runner: probe.NewRunner(reg, probe.Config{Node: "gpu-a"}, nil), Nodes: onA,
		Auth: &kubeauth.Reviewer{Client: admin}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runner := env.ServiceAccountToken(t, "faultline", "admin")
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "probe-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "faultline", Name: "admin"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, client(runner), authorizationv1.ResourceAttributes{Verb: "create", Group: kubeauth.Group, Resource: agentapi.Resource, Name: "gpu-a"})
	out := runAgent(t, ag, runner, agentapi.RunRequest{Checks: []string{"stress"}, Force: true})
	if len(out.Results) != 1 || out.Results[0].Status != probe.StatusPass || !tainted.Load() {
		t.Errorf("invasive run under the policy: %+v, tainted while running: %v", out, tainted.Load())
	}
	if err := update(onA, "gpu-a", probing(corev1.TaintEffectNoSchedule, "")); err != nil {
		t.Fatalf("agent: the probing taint on its own node: %v", err)
	}
	if err := ag.RemoveProbingTaint(ctx); err != nil {
		t.Fatalf("agent removing a stale taint: %v", err)
	}

	// Anyone else is untouched by the policy.
	if err := update(admin, "gpu-a", func(n *corev1.Node) { n.Labels["team"] = "b"; n.Spec.Unschedulable = true }); err != nil {
		t.Fatalf("the admin relabelling and cordoning: %v", err)
	}
	for _, name := range []string{"gpu-a", "gpu-b"} {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if hasProbingTaint(n) || n.Annotations["owner"] != "infra" || len(n.Spec.Taints) == 0 {
			t.Errorf("%s after the test: taints %v, annotations %v", name, n.Spec.Taints, n.Annotations)
		}
	}
}

type probeFunc func(ctx context.Context) (probe.Result, error)

func (probeFunc) Name() string { return "stress" }
func (f probeFunc) Run(ctx context.Context, _ probe.Params) (probe.Result, error) {
	return f(ctx)
}

func hasProbingTaint(n *corev1.Node) bool {
	for _, tn := range n.Spec.Taints {
		if tn.MatchTaint(&agent.ProbingTaint) {
			return true
		}
	}
	return false
}

// runAgent serves ag and runs req on it with token.
func runAgent(t *testing.T, ag *agent.Agent, token string, req agentapi.RunRequest) agentapi.RunResponse {
	t.Helper()
	srv := httptest.NewServer(ag.Handler())
	defer srv.Close()
	c := &agentapi.Client{BaseURL: srv.URL, Token: func() (string, error) { return token, nil }}
	out, err := c.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("agent run: %v", err)
	}
	return out
}

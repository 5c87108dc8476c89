package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestControllerAdmissionPolicy installs the chart's ValidatingAdmissionPolicy in a
// real apiserver and acts on a Node as the controller's ServiceAccount (with RBAC to
// update any Node) and as another identity with the same RBAC: the controller may
// set faultline.io/ taints, labels and annotations and the FaultlineFault and
// FaultlineService conditions, and nothing else (no cordon: the drain step evicts
// under the rule's taint); the other identity is not affected.
func TestControllerAdmissionPolicy(t *testing.T) {
	env, _ := startWithPolicy(t, "faultline-controller-nodes")
	ctx := context.Background()
	admin := env.Clientset()

	// Both identities may update any Node and patch its status (RBAC), as the
	// controller's ClusterRole allows.
	controller := asServiceAccount(t, env, "faultline", "faultline-controller")
	other := asServiceAccount(t, env, "faultline", "someone-else")

	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-vap",
		Labels:      map[string]string{"team": "a", "faultline.io/health": "ok"},
		Annotations: map[string]string{"owner": "infra"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := func(cs kubernetes.Interface, change func(n *corev1.Node)) error {
		return updateNode(t, admin, cs, metav1.UpdateOptions{}, node.Name, change)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "faultline controller may") {
			t.Errorf("controller: %s: %v, want refused by the policy", what, err)
		}
	}
	addForeignTaint := func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/evil", Effect: corev1.TaintEffectNoSchedule})
	}

	// The policy reaches the apiserver's admission asynchronously: wait with dry runs
	// (admission runs on them; nothing is stored).
	eventually.True(t, 30*time.Second, "the policy refusing the controller's foreign taint", func() bool {
		return updateNode(t, admin, controller, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, node.Name, addForeignTaint) != nil
	})
	refused("add a foreign taint", update(controller, addForeignTaint))
	refused("remove a foreign taint", update(controller, func(n *corev1.Node) { n.Spec.Taints = nil }))
	refused("add a foreign label", update(controller, func(n *corev1.Node) { n.Labels["team"] = "b" }))
	refused("remove a foreign label", update(controller, func(n *corev1.Node) { delete(n.Labels, "team") }))
	refused("change a foreign annotation", update(controller, func(n *corev1.Node) { n.Annotations["owner"] = "me" }))
	refused("cordon", update(controller, func(n *corev1.Node) { n.Spec.Unschedulable = true }))
	refused("a near-miss key", update(controller, func(n *corev1.Node) { n.Labels["faultline.io.evil.com/x"] = "y" }))
	refused("delete the Node", controller.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}))

	// Its own keys pass, written from a copy of its Node cache, which holds no
	// kubelet status: an update leaves the status as it is.
	if err := update(controller, func(n *corev1.Node) {
		n.Status = corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: n.Status.NodeInfo.BootID}}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "faultline.io/faulty", Effect: corev1.TaintEffectNoSchedule})
		n.Labels["faultline.io/health"] = "faulty"
		n.Annotations["faultline.io/faults"] = "gpu-vap.nvidia-xid.xid-79"
	}); err != nil {
		t.Fatalf("controller: its own taint, label and annotation: %v", err)
	}
	if err := update(controller, func(n *corev1.Node) {
		var keep []corev1.Taint // untaint its own, keep the foreign one
		for _, tt := range n.Spec.Taints {
			if tt.Key != "faultline.io/faulty" {
				keep = append(keep, tt)
			}
		}
		n.Spec.Taints = keep
		delete(n.Labels, "faultline.io/health")
	}); err != nil {
		t.Fatalf("controller: removing its own taint and label: %v", err)
	}

	condPatch := func(typ string) []byte {
		b, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
			"type": typ, "status": "True", "reason": "Test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}})
		return b
	}
	// Status: the FaultlineFault condition and the service step's FaultlineService.
	for _, c := range []string{"FaultlineFault", "FaultlineService"} {
		if _, err := controller.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, condPatch(c), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("controller: the %s condition: %v", c, err)
		}
	}
	_, err = controller.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, condPatch("Ready"), metav1.PatchOptions{}, "status")
	refused("set the Ready condition", err)

	// Anyone else is untouched by the policy.
	if err := update(other, addForeignTaint); err != nil {
		t.Fatalf("another identity adding a foreign taint: %v, want allowed (RBAC grants it)", err)
	}
	if err := update(other, func(n *corev1.Node) { n.Labels["team"] = "b"; n.Spec.Unschedulable = true }); err != nil {
		t.Fatalf("another identity relabelling and cordoning: %v", err)
	}

	n, err := admin.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, tt := range n.Spec.Taints {
		keys[tt.Key] = true
	}
	if !keys["example.com/maintenance"] || !keys["example.com/evil"] || keys["faultline.io/faulty"] || n.Labels["team"] != "b" ||
		n.Annotations["owner"] != "infra" || n.Annotations["faultline.io/faults"] == "" {
		t.Errorf("node after the test: taints %v, labels %v, annotations %v", keys, n.Labels, n.Annotations)
	}
	if len(n.Status.Addresses) != 1 || !slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Reason == "KubeletReady"
	}) {
		t.Errorf("node status after the test: %+v", n.Status)
	}
}

// asServiceAccount returns a client for a ServiceAccount's token, with RBAC to
// update every Node and patch its status.
func asServiceAccount(t *testing.T, env *testenv.Env, namespace, name string) kubernetes.Interface {
	t.Helper()
	token := env.ServiceAccountToken(t, namespace, name)
	ctx := context.Background()
	admin := env.Clientset()
	role := "node-updater-" + name
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.RESTConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, cs, authorizationv1.ResourceAttributes{Verb: "update", Resource: "nodes"})
	return cs
}

// startWithPolicy starts an apiserver with kube-controller-manager, whose status
// controller type-checks policies, creates the chart's ValidatingAdmissionPolicy
// and binding of that name (the defaults render, returned), and waits until the
// policy is type-checked; a warning on its expressions fails the test.
// With controller.autopilotCompat the controller may also write Autopilot's node
// labels and annotation (autopilot.ibm.com/gpuhealth, dcgm.level.3 and its output),
// and still no other autopilot.ibm.com/ key; without it, not those either.
func TestControllerAdmissionPolicyAutopilot(t *testing.T) {
	c := caseNamed(t, "defaults")
	c.sets = []string{"controller.autopilotCompat.enabled=true"}
	env, _ := startWithPolicyOf(t, c, "faultline-controller-nodes")
	ctx := context.Background()
	admin := env.Clientset()
	controller := asServiceAccount(t, env, "faultline", "faultline-controller")
	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-ap",
		Labels: map[string]string{"autopilot.ibm.com/other": "x"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := func(change func(n *corev1.Node)) error {
		return updateNode(t, admin, controller, metav1.UpdateOptions{}, node.Name, change)
	}
	foreign := func(n *corev1.Node) { n.Labels["autopilot.ibm.com/other"] = "y" }
	eventually.True(t, 30*time.Second, "the policy refusing another autopilot.ibm.com/ label", func() bool {
		return updateNode(t, admin, controller, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, node.Name, foreign) != nil
	})
	if err := update(func(n *corev1.Node) {
		n.Labels["autopilot.ibm.com/gpuhealth"] = "EVICT"
		n.Labels["autopilot.ibm.com/dcgm.level.3"] = "ERR_2024-10-10_19.12.03UTC"
		n.Annotations = map[string]string{"autopilot.ibm.com/dcgm.level.3.output": "memory.3"}
	}); err != nil {
		t.Fatalf("controller: Autopilot's labels and annotation: %v", err)
	}
	if err := update(func(n *corev1.Node) { delete(n.Labels, "autopilot.ibm.com/gpuhealth") }); err != nil {
		t.Fatalf("controller: removing the gpuhealth label: %v", err)
	}
	if err := update(foreign); err == nil || !strings.Contains(err.Error(), "faultline controller may") {
		t.Errorf("controller: another autopilot.ibm.com/ label: %v, want refused", err)
	}

	// The defaults refuse Autopilot's keys.
	objs := parse(t, render(t, caseNamed(t, "defaults")))
	policy := get[admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "faultline-controller-nodes")
	for _, v := range policy.Spec.Variables {
		if (v.Name == "ownLabels" || v.Name == "ownAnnotations") && v.Expression != "[]" {
			t.Errorf("defaults: %s = %s, want []", v.Name, v.Expression)
		}
	}
}

// TestControllerAdmissionTaintEffects: the controller's faultline.io/ taints may
// have only the effects of controller.taintEffects. With the defaults a NoExecute
// taint (which would evict every pod of the node, PodDisruptionBudgets or not) is
// refused, added or changed into; NoSchedule and PreferNoSchedule pass, and a
// NoExecute taint placed by someone else may be kept or removed. The policy of a
// render listing NoExecute lets it through.
func TestControllerAdmissionTaintEffects(t *testing.T) {
	env, _ := startWithPolicy(t, "faultline-controller-nodes")
	ctx := context.Background()
	admin := env.Clientset()
	controller := asServiceAccount(t, env, "faultline", "faultline-controller")
	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-effects"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := func(opts metav1.UpdateOptions, change func(n *corev1.Node)) error {
		return updateNode(t, admin, controller, opts, node.Name, change)
	}
	taint := func(key, value string, effect corev1.TaintEffect) func(n *corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
		}
	}
	without := func(key string) func(n *corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) ||
			!strings.Contains(err.Error(), "may add or change faultline.io/ taints only with the effects NoSchedule, PreferNoSchedule") {
			t.Errorf("controller: %s: %v, want refused by the policy, naming the allowed effects", what, err)
		}
	}
	noExecute := taint("faultline.io/x", "", corev1.TaintEffectNoExecute)
	eventually.True(t, 30*time.Second, "the policy refusing the controller's NoExecute taint", func() bool {
		return update(metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, noExecute) != nil
	})
	refused("add faultline.io/x:NoExecute", update(metav1.UpdateOptions{}, noExecute))
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule} {
		if err := update(metav1.UpdateOptions{}, taint("faultline.io/x", "", effect)); err != nil {
			t.Fatalf("controller: faultline.io/x:%s: %v", effect, err)
		}
	}
	refused("change faultline.io/x:NoSchedule into NoExecute", update(metav1.UpdateOptions{}, func(n *corev1.Node) {
		for i := range n.Spec.Taints {
			if n.Spec.Taints[i].Key == "faultline.io/x" && n.Spec.Taints[i].Effect == corev1.TaintEffectNoSchedule {
				n.Spec.Taints[i].Effect = corev1.TaintEffectNoExecute
			}
		}
	}))

	// A NoExecute taint someone else placed (an earlier install's, by hand) may stay
	// while the controller writes, but not change; and it may be removed.
	if err := updateNode(t, admin, admin, metav1.UpdateOptions{}, node.Name, taint("faultline.io/old", "a", corev1.TaintEffectNoExecute)); err != nil {
		t.Fatal(err)
	}
	if err := update(metav1.UpdateOptions{}, without("faultline.io/x")); err != nil {
		t.Fatalf("controller: removing its taints beside the kept NoExecute one: %v", err)
	}
	refused("change the value of faultline.io/old:NoExecute", update(metav1.UpdateOptions{}, func(n *corev1.Node) {
		for i := range n.Spec.Taints {
			if n.Spec.Taints[i].Key == "faultline.io/old" {
				n.Spec.Taints[i].Value = "b"
			}
		}
	}))
	if err := update(metav1.UpdateOptions{}, without("faultline.io/old")); err != nil {
		t.Fatalf("controller: removing faultline.io/old:NoExecute: %v", err)
	}

	// The policy of a render that lists NoExecute allows it.
	c := caseNamed(t, "defaults")
	c.sets = []string{"controller.taintEffects={NoSchedule,PreferNoSchedule,NoExecute}"}
	wide := get[admissionregistrationv1.ValidatingAdmissionPolicy](t, parse(t, render(t, c)), "ValidatingAdmissionPolicy", "faultline-controller-nodes")
	eventually.NoError(t, 30*time.Second, "the policy replaced", func() error {
		cur, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, wide.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec = wide.Spec
		_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	eventually.NoError(t, 30*time.Second, "the replaced policy allowing NoExecute", func() error {
		return update(metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, noExecute)
	})
	if err := update(metav1.UpdateOptions{}, noExecute); err != nil {
		t.Fatalf("controller: faultline.io/x:NoExecute with controller.taintEffects listing it: %v", err)
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's own node.kubernetes.io/not-ready taint aside.
	own := slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return !strings.HasPrefix(t.Key, "faultline.io/") })
	if len(own) != 1 || own[0].Key != "faultline.io/x" || own[0].Effect != corev1.TaintEffectNoExecute {
		t.Errorf("faultline.io/ taints after the test: %+v", own)
	}
}

// TestTaintEffectsAgree: the admission policy and the controller's pack validation
// (--allow-taint-effects) take their effects from controller.taintEffects, in every
// controller Deployment (shards too); a list without NoSchedule, every rule's
// default effect, or with an unknown effect, does not render.
func TestTaintEffectsAgree(t *testing.T) {
	shards := []string{"controller.shards[0].name=a", "controller.shards[0].value=a", "controller.shards[1].name=b", "controller.shards[1].value=b"}
	for _, tc := range []struct {
		sets       []string
		cel, flag  string
		deployment []string
	}{
		{nil, "['NoSchedule', 'PreferNoSchedule']", "--allow-taint-effects=NoSchedule,PreferNoSchedule", []string{"faultline-controller"}},
		{append([]string{"controller.taintEffects={NoSchedule,NoExecute}"}, shards...), "['NoSchedule', 'NoExecute']",
			"--allow-taint-effects=NoSchedule,NoExecute", []string{"faultline-controller-a", "faultline-controller-b"}},
	} {
		c := caseNamed(t, "defaults")
		c.sets = tc.sets
		objs := parse(t, render(t, c))
		policy := get[admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "faultline-controller-nodes")
		i := slices.IndexFunc(policy.Spec.Variables, func(v admissionregistrationv1.Variable) bool { return v.Name == "taintEffects" })
		if i < 0 || policy.Spec.Variables[i].Expression != tc.cel {
			t.Errorf("%v: the policy's taintEffects %+v, want %s", tc.sets, policy.Spec.Variables, tc.cel)
		}
		for _, name := range tc.deployment {
			d := deployment(t, objs, name)
			if cc := container(t, &d.Spec.Template.Spec, "controller"); !hasArg(cc, tc.flag) {
				t.Errorf("%v: %s args %v, want %s", tc.sets, name, cc.Args, tc.flag)
			}
		}
	}
	for _, tc := range []struct{ set, want string }{
		{"controller.taintEffects={PreferNoSchedule}", "controller.taintEffects must include NoSchedule"},
		{"controller.taintEffects={NoSchedule,Evict}", "taintEffects"},
	} {
		c := caseNamed(t, "defaults")
		c.sets = []string{tc.set}
		if _, err := helm(t, c.args(repoRoot(t))...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("render with %s: %v, want refused naming %q", tc.set, err, tc.want)
		}
	}
}

func startWithPolicy(t *testing.T, name string) (*testenv.Env, objects) {
	t.Helper()
	return startWithPolicyOf(t, caseNamed(t, "defaults"), name)
}

// startWithPolicyOf is startWithPolicy with the chart rendered as c.
func startWithPolicyOf(t *testing.T, c renderCase, name string) (*testenv.Env, objects) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{ControllerManager: true, Controllers: []string{"validatingadmissionpolicy-status-controller"}})
	ctx := context.Background()
	admin := env.Clientset()
	objs := parse(t, render(t, c))
	policy := get[admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", name)
	binding := get[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding", name)
	created, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the chart's policy: %v", err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 30*time.Second, "the policy type-checked", func() error {
		p, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.ObservedGeneration != p.Generation {
			return fmt.Errorf("status of generation %d, want %d", p.Status.ObservedGeneration, p.Generation)
		}
		if tc := p.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
			t.Fatalf("the policy's expressions do not type-check: %+v", tc.ExpressionWarnings)
		}
		return nil
	})
	return env, objs
}

// updateNode reads node as the admin, applies change and updates it as cs, with
// opts: what is refused is refused to cs.
func updateNode(t *testing.T, admin, cs kubernetes.Interface, opts metav1.UpdateOptions, node string, change func(n *corev1.Node)) error {
	t.Helper()
	ctx := context.Background()
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(n)
	_, err = cs.CoreV1().Nodes().Update(ctx, n, opts)
	return err
}

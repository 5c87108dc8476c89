package chart

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestNodeFaultRequestPolicy installs the chart's request policy in a real apiserver:
// an operator (the chart's operator role) may write spec.request naming themselves,
// and nothing else of a NodeFault's spec; a request naming someone else is refused;
// an identity that may update nodefaults but lacks the action's pseudo-subresource
// is refused that action; the controller's identity is not affected.
func TestNodeFaultRequestPolicy(t *testing.T) {
	env, objs := startWithPolicy(t, "faultline-nodefault-requests")
	env.InstallCRD(t, v1alpha1.CRDYAML)
	admin := env.Clientset()
	ctx := context.Background()
	as := func(name string, rules []rbacv1.PolicyRule) (rest.Interface, string) {
		t.Helper()
		return faultlineClientAs(t, env, name, rules, authorizationv1.ResourceAttributes{Group: v1alpha1.Group, Verb: "patch", Resource: "nodefaults"})
	}
	operator, operatorName := as("operator", clusterRole(t, objs, "faultline-operator").Rules)
	updater, updaterName := as("updater", []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: []string{"nodefaults"}, Verbs: []string{"get", "patch"}}})
	controller, _ := as("faultline-controller", []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: []string{"nodefaults"}, Verbs: []string{"get", "patch"}}})

	rc, err := v1alpha1.NewRESTClient(admin)
	if err != nil {
		t.Fatal(err)
	}
	nf := &v1alpha1.NodeFault{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1.nvidia-xid.xid-gpu-lost"},
		Spec: v1alpha1.NodeFaultSpec{Node: "gpu-1", Pack: "nvidia-xid", Rule: "xid-gpu-lost", Taint: "faultline.io/faulty=xid-gpu-lost:NoSchedule"}}
	if err := rc.Post().Resource("nodefaults").Body(nf).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	patch := func(as rest.Interface, spec map[string]any, dryRun bool) error {
		b, _ := json.Marshal(map[string]any{"spec": spec})
		req := as.Patch(types.MergePatchType).Resource("nodefaults").Name(nf.Name).Body(b)
		if dryRun {
			req = req.Param("dryRun", "All")
		}
		return req.Do(ctx).Error()
	}
	request := func(action v1alpha1.RequestAction, by string, at int) map[string]any {
		return map[string]any{"request": v1alpha1.Request{Action: action, RequestedBy: by, Reason: "reseated", Time: metav1.NewTime(time.Unix(int64(1_800_000_000+at), 0))}}
	}
	refused := func(what, want string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused (%q)", what, err, want)
		}
	}
	// The policy reaches admission asynchronously: wait with dry runs.
	eventually.True(t, 30*time.Second, "the policy refusing a request in another's name", func() bool {
		return patch(operator, request(v1alpha1.RequestResolve, "someone-else", 0), true) != nil
	})
	refused("a request in another's name", "must name the requester", patch(operator, request(v1alpha1.RequestResolve, "system:admin", 1), false))
	refused("an operator changing the taint", "only the controller changes", patch(operator, map[string]any{"taint": "faultline.io/faulty=x:NoExecute"}, false))
	refused("a Resolve without nodefaults/resolve", "needs create on nodefaults/resolve", patch(updater, request(v1alpha1.RequestResolve, updaterName, 2), false))
	if err := patch(operator, request(v1alpha1.RequestResolve, operatorName, 3), false); err != nil {
		t.Errorf("an operator's Resolve in their own name: %v", err)
	}
	// The same request again (unchanged) is no new request: any identity with patch
	// may send the object back as it is.
	if err := patch(updater, map[string]any{"description": nil}, false); err != nil {
		t.Errorf("an update that leaves the request as it is: %v", err)
	}
	if err := patch(controller, map[string]any{"severity": "critical"}, false); err != nil {
		t.Errorf("the controller writing the spec: %v", err)
	}
}

// faultlineClientAs is a faultline.io client as the ServiceAccount faultline/name,
// bound to a ClusterRole of rules, once the authorizer allows it allowed; it returns
// the client and the ServiceAccount's username.
func faultlineClientAs(t *testing.T, env *testenv.Env, name string, rules []rbacv1.PolicyRule, allowed authorizationv1.ResourceAttributes) (rest.Interface, string) {
	t.Helper()
	ctx := context.Background()
	admin := env.Clientset()
	token := env.ServiceAccountToken(t, "faultline", name)
	role := "test-" + name
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "faultline", Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.RESTConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, cs, allowed)
	rc, err := v1alpha1.NewRESTClient(cs)
	if err != nil {
		t.Fatal(err)
	}
	return rc, "system:serviceaccount:faultline:" + name
}

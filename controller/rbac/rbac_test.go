package rbac

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/checkpoint"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/leader"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	polling "github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

const (
	ns = "faultline-system"
	sa = "faultline-controller"
)

// eventually polls f until it returns nil (RBAC changes reach the authorizer
// through its informers, within milliseconds but not at once).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	polling.NoError(t, 15*time.Second, what, f)
}

// result carries a call's value and error to get, which fails the test on an error:
// must(call()).get(t).
type result[T any] struct {
	v   T
	err error
}

func must[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) get(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// TestControllerRBAC runs the controller's operations as a ServiceAccount bound to
// exactly the ClusterRole and the Role, on a real kube-apiserver, then shows each
// permission is needed and that what the controller must not do is denied.
func TestControllerRBAC(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	env.InstallCRD(t, v1alpha1.CRDYAML)
	admin := env.Clientset()
	ctx := context.Background()

	token := env.ServiceAccountToken(t, ns, sa) // creates the namespace and the account
	must(admin.RbacV1().ClusterRoles().Create(ctx, ClusterRole(), metav1.CreateOptions{})).get(t)
	must(admin.RbacV1().Roles(ns).Create(ctx, Role(ns), metav1.CreateOptions{})).get(t)
	must(admin.RbacV1().ClusterRoleBindings().Create(ctx, ClusterRoleBinding(ns, sa), metav1.CreateOptions{})).get(t)
	must(admin.RbacV1().RoleBindings(ns).Create(ctx, RoleBinding(ns, sa), metav1.CreateOptions{})).get(t)
	for _, name := range []string{"gpu-1", "gpu-2", "gpu-3"} {
		must(admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}},
			Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-" + name}},
		}, metav1.CreateOptions{})).get(t)
	}
	cs := must(kubernetes.NewForConfig(env.RESTConfigForToken(token))).get(t)
	eventually(t, "the bindings take effect", func() error {
		_, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})

	t.Run("ControllerFlows", func(t *testing.T) {
		a := must(act.New(cs, act.Options{Condition: true, Instance: "faultline-controller-0"})).get(t)
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer a.Shutdown()
		r := &rules.Compiled{ID: "xid-gpu-lost", Pack: "nvidia-xid", Severity: rules.SeverityCritical, Action: rules.ActionTaint,
			Taint: rules.Taint{Key: rules.DefaultTaintKey, Value: "xid-gpu-lost", Effect: "NoSchedule"}, Recover: rules.Recover{OnReboot: true}}
		now := time.Now().UTC()
		f := fault.Fault{Node: "gpu-3", Rule: r, Count: 1, Time: now,
			Evidence: []logstream.Line{{Time: now, Text: "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}}}
		boot := must(a.BootID("gpu-3")).get(t)
		res := must(a.TaintNode(ctx, f, boot)).get(t)
		if len(res.Added) != 1 || !res.Condition {
			t.Fatalf("Taint as the controller: %+v", res)
		}
		if err := a.Event(ctx, "gpu-3", f, act.ReasonEvent, "same message twice: counted by a patch"); err != nil {
			t.Fatal(err)
		}
		if err := a.Event(ctx, "gpu-3", f, act.ReasonEvent, "same message twice: counted by a patch"); err != nil {
			t.Fatal(err)
		}
		self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "faultline-controller-0", Namespace: ns, UID: "0a1b2c3d"}}
		if err := a.EventOn(self, corev1.EventTypeWarning, act.ReasonPackReloadFailed, "90-site.yaml:3: bad regex"); err != nil {
			t.Fatal(err)
		}
		res = must(a.UntaintNode(ctx, "gpu-3", act.AllRules)).get(t)
		if len(res.Removed) != 1 || !res.Condition {
			t.Fatalf("Untaint as the controller: %+v", res)
		}
		n := must(admin.CoreV1().Nodes().Get(ctx, "gpu-3", metav1.GetOptions{})).get(t)
		for _, tt := range n.Spec.Taints {
			if tt.Key == rules.DefaultTaintKey {
				t.Fatalf("taint left: %v", n.Spec.Taints)
			}
		}
		// Every Event arrived: the repeated one was counted with a patch.
		eventually(t, "events written by the controller", func() error {
			evs := must(admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=gpu-3"})).get(t)
			got := map[string]int32{}
			for _, e := range evs.Items {
				got[e.Reason] += e.Count
				if e.Reason == act.ReasonEvent && e.Count < 2 {
					return fmt.Errorf("FaultEvent count %d", e.Count)
				}
			}
			if got[act.ReasonTainted] != 1 || got[act.ReasonEvent] != 2 || got[act.ReasonUntainted] != 1 {
				return fmt.Errorf("events by reason: %v", got)
			}
			pe := must(admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})).get(t)
			if len(pe.Items) != 1 || pe.Items[0].Reason != act.ReasonPackReloadFailed {
				return fmt.Errorf("pod events: %+v", pe.Items)
			}
			return nil
		})

		// The drain step, as the controller: kubectl's drain helper finds the node's
		// pods, reads the DaemonSet of one it leaves, evicts the other and reads it
		// back until it is gone.
		sel := map[string]string{"app": "drain-agent"}
		ds := must(admin.AppsV1().DaemonSets(metav1.NamespaceDefault).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "drain-agent"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agent"}}}}}}, metav1.CreateOptions{})).get(t)
		yes := true
		for name, owner := range map[string]metav1.OwnerReference{
			"drain-agent-gpu-2": {APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes},
			"trainer-gpu-2":     {APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "trainer", UID: "trainer-uid", Controller: &yes},
		} {
			must(admin.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
				Spec:       corev1.PodSpec{NodeName: "gpu-2", Containers: []corev1.Container{{Name: "c", Image: "train"}}}}, metav1.CreateOptions{})).get(t)
		}
		zero := 0
		dr, err := a.Drain(ctx, "gpu-2", act.DrainOptions{Timeout: 20 * time.Second, GracePeriodSeconds: &zero})
		if err != nil || len(dr.Evicted) != 1 || dr.Evicted[0] != "default/trainer-gpu-2" {
			t.Fatalf("Drain as the controller: %+v, %v", dr, err)
		}
		if _, err := admin.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "drain-agent-gpu-2", metav1.GetOptions{}); err != nil {
			t.Fatalf("the DaemonSet's pod: %v", err)
		}

		// The checkpoint and leader election, with the project's own code.
		store := checkpoint.New(cs, ns, controller.DefaultCheckpointName)
		if err := store.SaveState(ctx, []byte(`{"n":1}`), now, []byte(`{"rules":[]}`)); err != nil {
			t.Fatal(err)
		}
		if err := store.SaveState(ctx, []byte(`{"n":2}`), now.Add(time.Second), nil); err != nil {
			t.Fatal(err)
		}
		if state, storms, err := store.LoadState(ctx); err != nil || string(state) != `{"n":2}` || string(storms) != `{"rules":[]}` {
			t.Fatalf("checkpoint LoadState = %s, %s, %v", state, storms, err)
		}
		lctx, stop := context.WithCancel(ctx)
		led := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- leader.Run(lctx, leader.Config{Client: cs, Namespace: ns, Name: controller.DefaultLeaseName, Identity: "faultline-controller-0",
				LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond},
				func(c context.Context) {
					close(led)
					<-c.Done()
				})
		}()
		select {
		case <-led:
		case <-time.After(20 * time.Second):
			t.Fatal("never became leader with the Role")
		}
		time.Sleep(700 * time.Millisecond) // a few renewals (lease updates)
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		l := must(admin.CoordinationV1().Leases(ns).Get(ctx, controller.DefaultLeaseName, metav1.GetOptions{})).get(t)
		if l.Spec.LeaseTransitions == nil {
			t.Fatalf("lease %+v", l.Spec)
		}
	})

	t.Run("EveryPermissionIsNeeded", func(t *testing.T) {
		fx := &fixture{admin: admin, ns: ns, podNS: "ml", node: "gpu-1", event: "gpu-1.proof", nsEvent: "faultline-controller-0.proof", lease: controller.DefaultLeaseName, cm: controller.DefaultCheckpointName}
		must(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fx.podNS}}, metav1.CreateOptions{})).get(t)
		must(admin.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fx.event},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: fx.node},
			Reason:         "FaultEvent", Message: "proof", Type: corev1.EventTypeWarning, Count: 1,
		}, metav1.CreateOptions{})).get(t)
		must(admin.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fx.nsEvent},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "faultline-controller-0"},
			Reason:         "PackReloadFailed", Message: "proof", Type: corev1.EventTypeWarning, Count: 1,
		}, metav1.CreateOptions{})).get(t)
		// The controller's own Lease and checkpoint (ControllerFlows may have made them).
		exists := func(_ any, err error) {
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		exists(admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fx.lease}}, metav1.CreateOptions{}))
		exists(admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fx.cm}}, metav1.CreateOptions{}))
		must(store(admin).Record(ctx, fx.node, "proof", "proof", nodefault.Change{Phase: v1alpha1.PhaseObserved, Cause: nodefault.CauseAnnotate})).get(t)

		// With the full roles, every proof succeeds.
		proofs := allProofs()
		for a, p := range proofs {
			if err := p.run(ctx, fx, cs); err != nil {
				t.Fatalf("%s (%s) fails with the full roles: %v", a, p.why, err)
			}
		}
		type roleSpec struct {
			kind   string
			rules  []rbacv1.PolicyRule
			update func(rules []rbacv1.PolicyRule) error
		}
		setCluster := func(rules []rbacv1.PolicyRule) error {
			cr, err := admin.RbacV1().ClusterRoles().Get(ctx, Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cr.Rules = rules
			_, err = admin.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{})
			return err
		}
		setRole := func(namespace, name string) func([]rbacv1.PolicyRule) error {
			return func(rules []rbacv1.PolicyRule) error {
				r, err := admin.RbacV1().Roles(namespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				r.Rules = rules
				_, err = admin.RbacV1().Roles(namespace).Update(ctx, r, metav1.UpdateOptions{})
				return err
			}
		}
		specs := []roleSpec{
			{"ClusterRole", ClusterRole().Rules, setCluster},
			{"Role", Role(ns).Rules, setRole(ns, Name)},
		}
		n := 0
		for _, s := range specs {
			for _, a := range atoms(s.rules) {
				p := proofs[a]
				if err := s.update(without(s.rules, a)); err != nil {
					t.Fatal(err)
				}
				var last error
				eventually(t, fmt.Sprintf("%s without %s: %s is forbidden", s.kind, a, p.why), func() error {
					last = p.run(ctx, fx, cs)
					if apierrors.IsForbidden(last) {
						return nil
					}
					return fmt.Errorf("still allowed (err=%v)", last)
				})
				t.Logf("%-11s without %-38s -> %s: forbidden", s.kind, a, p.why)
				if err := s.update(s.rules); err != nil {
					t.Fatal(err)
				}
				eventually(t, fmt.Sprintf("%s restored: %s", s.kind, a), func() error { return p.run(ctx, fx, cs) })
				n++
			}
		}
		if n != len(proofs) {
			t.Fatalf("%d permissions removed, %d proofs", n, len(proofs))
		}
	})

	t.Run("DeniedOperations", func(t *testing.T) {
		type check struct {
			ns, group, resource, sub, verb string
			allowed                        bool
			name                           string
		}
		lease, cp := controller.DefaultLeaseName, controller.DefaultCheckpointName
		checks := []check{
			// Sanity: what the controller does is allowed.
			{"", "", "nodes", "", "patch", true, ""},
			{"", "", "nodes", "status", "patch", true, ""},
			{ns, "coordination.k8s.io", "leases", "", "update", true, lease},
			{ns, "", "configmaps", "", "update", true, cp},
			{ns, "", "configmaps", "", "get", true, cp},
			{ns, "", "pods", "", "list", true, ""},
			{metav1.NamespaceDefault, "", "events", "", "create", true, ""},
			{ns, "", "events", "", "create", true, ""},
			// Events go where a fault's pods run, any namespace; they are never
			// read, updated or deleted there.
			{"kube-system", "", "events", "", "create", true, ""},
			{"kube-system", "", "events", "", "patch", true, ""},
			{"kube-system", "", "events", "", "update", false, ""},
			{"kube-system", "", "events", "", "list", false, ""},
			// The GPU pods' informer; their owners are read, never written.
			{"", "", "pods", "", "watch", true, ""},
			{metav1.NamespaceDefault, "apps", "replicasets", "", "get", true, ""},
			{metav1.NamespaceDefault, "batch", "jobs", "", "get", true, ""},
			{metav1.NamespaceDefault, "apps", "replicasets", "", "list", false, ""},
			{metav1.NamespaceDefault, "batch", "jobs", "", "update", false, ""},
			{metav1.NamespaceDefault, "batch", "jobs", "", "delete", false, ""},
			{metav1.NamespaceDefault, "apps", "deployments", "", "get", false, ""},
			// Only the controller's own Lease and checkpoint, by name.
			{ns, "coordination.k8s.io", "leases", "", "update", false, "kube-scheduler"},
			{ns, "coordination.k8s.io", "leases", "", "get", false, "another"},
			{ns, "", "configmaps", "", "get", false, "kube-root-ca.crt"},
			{ns, "", "configmaps", "", "update", false, "another"},
			{ns, "", "configmaps", "", "get", false, ""},
			{ns, "coordination.k8s.io", "leases", "", "update", false, ""},
			// Pods: listed and read anywhere and evicted (the drain step, its
			// spec's permissions below), never written or deleted.
			{"", "apps", "daemonsets", "", "list", false, ""},
			{ns, "", "pods", "", "update", false, ""},
			{ns, "", "pods", "exec", "create", false, ""},
			// What it must not do.
			{"", "", "nodes", "", "delete", false, ""},
			{"", "", "nodes", "", "create", false, ""},
			{"", "", "nodes", "", "update", false, ""},
			{"", "", "nodes", "status", "update", false, ""},
			{"", "", "nodes", "proxy", "get", false, ""},
			{ns, "", "secrets", "", "get", false, ""},
			{ns, "", "secrets", "", "list", false, ""},
			{"kube-system", "", "secrets", "", "get", false, ""},
			{metav1.NamespaceDefault, "", "pods", "", "create", false, ""},
			{metav1.NamespaceDefault, "", "pods", "", "delete", false, ""},
			{"kube-system", "", "configmaps", "", "patch", false, ""},
			{"kube-system", "", "configmaps", "", "update", false, ""},
			{metav1.NamespaceDefault, "", "configmaps", "", "get", false, ""},
			{ns, "", "configmaps", "", "list", false, ""},
			{ns, "", "configmaps", "", "delete", false, ""},
			{"kube-system", "coordination.k8s.io", "leases", "", "update", false, ""},
			{ns, "coordination.k8s.io", "leases", "", "delete", false, ""},
			{metav1.NamespaceDefault, "", "events", "", "delete", false, ""},
			{metav1.NamespaceDefault, "events.k8s.io", "events", "", "create", false, ""},
			{ns, "", "serviceaccounts", "token", "create", false, ""},
			{"", "rbac.authorization.k8s.io", "clusterroles", "", "escalate", false, ""},
			{"", "rbac.authorization.k8s.io", "clusterrolebindings", "", "create", false, ""},
			{"", "", "users", "", "impersonate", false, ""},
		}
		// What the remediation steps' specs say they need, in any namespace.
		for a := range stepAtoms() {
			res, sub, _ := strings.Cut(a.resource, "/")
			checks = append(checks, check{metav1.NamespaceDefault, a.group, res, sub, a.verb, true, ""})
		}
		for _, c := range checks {
			r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: c.ns, Group: c.group, Resource: c.resource, Subresource: c.sub, Verb: c.verb, Name: c.name}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("%s %s/%s", c.verb, c.group, c.resource)
			if c.sub != "" {
				what += "/" + c.sub
			}
			if c.name != "" {
				what += " " + c.name
			}
			if c.ns != "" {
				what += " in " + c.ns
			}
			if r.Status.Allowed != c.allowed {
				t.Errorf("%s: allowed=%v, want %v (%s)", what, r.Status.Allowed, c.allowed, r.Status.Reason)
			}
		}
		// And for real: deleting a node is refused.
		err := cs.CoreV1().Nodes().Delete(ctx, "gpu-2", metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("delete node: %v", err)
		}
		var se apierrors.APIStatus
		if !errors.As(err, &se) {
			t.Fatalf("not an API status: %v", err)
		}
	})
}

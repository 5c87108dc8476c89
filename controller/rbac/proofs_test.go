package rbac

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// atom is one permission: a verb on a resource of an API group.
type atom struct{ group, resource, verb string }

func (a atom) String() string {
	g := a.group
	if g == "" {
		g = "core"
	}
	return g + "/" + a.resource + ":" + a.verb
}

// atoms expands rules into single permissions.
func atoms(rules []rbacv1.PolicyRule) []atom {
	var out []atom
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, atom{g, res, v})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// without returns rules minus one permission, one rule per remaining permission.
func without(rules []rbacv1.PolicyRule, drop atom) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, a := range atoms(rules) {
		if a != drop {
			out = append(out, rbacv1.PolicyRule{APIGroups: []string{a.group}, Resources: []string{a.resource}, Verbs: []string{a.verb}})
		}
	}
	return out
}

// fixture is what the proofs act on; the admin client prepares everything a proof
// needs but the one permission it proves.
type fixture struct {
	admin kubernetes.Interface
	ns    string // the controller's namespace
	node  string
	event string // an Event in "default" on node
	lease string // a Lease in ns
	cm    string // a ConfigMap in ns
	nf    string // a NodeFault (pack "proof", rule "proof" on node)
	seq   atomic.Int64
}

func (f *fixture) next() int64 { return f.seq.Add(1) }

// proof performs, with the controller's client sa, the one call of the controller
// that needs a permission.
type proof struct {
	why string
	run func(ctx context.Context, f *fixture, sa kubernetes.Interface) error
}

// proofs maps every permission of the ClusterRole and the Role to a call the
// controller makes with it. A permission without a proof fails TestEveryPermissionHasAProof.
var proofs = map[atom]proof{
	{"", "nodes", "list"}: {"the Node informer lists", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}},
	{"", "nodes", "watch"}: {"the Node informer watches", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		sec := int64(1)
		w, err := sa.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{TimeoutSeconds: &sec})
		if err == nil {
			w.Stop()
		}
		return err
	}},
	{"", "nodes", "get"}: {"a Node is re-read from the API after a write conflict", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().Nodes().Get(ctx, f.node, metav1.GetOptions{})
		return err
	}},
	{"", "nodes", "update"}: {"taint and pointer annotation: update of the full Node", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		n, err := f.admin.CoreV1().Nodes().Get(ctx, f.node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations["rbac-test/seq"] = fmt.Sprint(f.next())
		_, err = sa.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}},
	{"", "nodes/status", "patch"}: {"the node condition: strategic merge patch of nodes/status", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"FaultlineFault","status":"False","reason":"NoFault","message":"%d"}]}}`, f.next())
		_, err := sa.CoreV1().Nodes().Patch(ctx, f.node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		return err
	}},
	{"", "events", "create"}: {"the event recorder creates an Event", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.proof%d", f.node, f.next())},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: f.node},
			Reason:         "FaultEvent", Message: "proof", Type: corev1.EventTypeWarning, Count: 1,
		}, metav1.CreateOptions{})
		return err
	}},
	{"", "events", "patch"}: {"the event recorder patches an Event it counts again", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		patch := fmt.Sprintf(`{"count":%d,"message":"proof"}`, f.next()+1)
		_, err := sa.CoreV1().Events(metav1.NamespaceDefault).Patch(ctx, f.event, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}},
	{"faultline.io", "nodefaults", "get"}: {"a record is read before it is updated", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).Get(ctx, nodefault.Name(f.node, "proof", "proof"))
		return err
	}},
	{"faultline.io", "nodefaults", "list"}: {"a new leader resumes held faults; resolved ones are collected", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).List(ctx)
		return err
	}},
	{"faultline.io", "nodefaults", "watch"}: {"the NodeFault informer watches (taint ownership, facts)", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		body, err := sa.CoreV1().RESTClient().Get().AbsPath("/apis/faultline.io/v1alpha1/nodefaults").
			Param("watch", "true").Param("timeoutSeconds", "1").Stream(ctx)
		if err == nil {
			_ = body.Close()
		}
		return err
	}},
	{"faultline.io", "nodefaults", "create"}: {"a fault's record is opened", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).Record(ctx, f.node, "proof", fmt.Sprint("new-", f.next()), nodefault.Change{Phase: v1alpha1.PhaseObserved})
		return err
	}},
	{"faultline.io", "nodefaults/status", "update"}: {"a record's status follows the fault", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).Record(ctx, f.node, "proof", "proof", nodefault.Change{Decision: fmt.Sprint("proof-", f.next())})
		return err
	}},
	{"faultline.io", "nodefaults", "delete"}: {"a resolved record is collected after its retention", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		// Resolved (as admin) a year ago, by the clock of the collecting store.
		rule := fmt.Sprint("old-", f.next())
		if _, err := store(f.admin).Record(ctx, f.node, "proof", rule, nodefault.Change{Phase: v1alpha1.PhaseResolved}); err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		st, _ := nodefault.New(sa, nodefault.Options{Retention: time.Hour, Now: func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }})
		_, err := st.Collect(ctx)
		return err
	}},
	{"authentication.k8s.io", "tokenreviews", "create"}: {"the API asks who a caller is", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: "proof"}}, metav1.CreateOptions{})
		return err
	}},
	{"authorization.k8s.io", "subjectaccessreviews", "create"}: {"the API asks whether a caller may act", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "proof", ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: "faultline.io", Resource: "faults", Verb: "get"}}}, metav1.CreateOptions{})
		return err
	}},
	{"coordination.k8s.io", "leases", "get"}: {"leader election reads the Lease", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoordinationV1().Leases(f.ns).Get(ctx, f.lease, metav1.GetOptions{})
		return err
	}},
	{"coordination.k8s.io", "leases", "create"}: {"leader election creates the Lease the first time", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoordinationV1().Leases(f.ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proof-%d", f.next())}}, metav1.CreateOptions{})
		return err
	}},
	{"coordination.k8s.io", "leases", "update"}: {"leader election renews or takes over the Lease", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		l, err := f.admin.CoordinationV1().Leases(f.ns).Get(ctx, f.lease, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		id := fmt.Sprint("proof-", f.next())
		l.Spec.HolderIdentity = &id
		_, err = sa.CoordinationV1().Leases(f.ns).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}},
	{"", "configmaps", "get"}: {"the checkpoint is loaded", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().ConfigMaps(f.ns).Get(ctx, f.cm, metav1.GetOptions{})
		return err
	}},
	{"", "configmaps", "create"}: {"the checkpoint is created the first time", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().ConfigMaps(f.ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proof-%d", f.next())}}, metav1.CreateOptions{})
		return err
	}},
	{"", "configmaps", "update"}: {"the checkpoint advances", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		cm, err := f.admin.CoreV1().ConfigMaps(f.ns).Get(ctx, f.cm, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		cm.Data = map[string]string{"position-unix-nano": fmt.Sprint(f.next())}
		_, err = sa.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}},
}

func store(c kubernetes.Interface) *nodefault.Store {
	s, err := nodefault.New(c, nodefault.Options{Owner: "faultline-controller-0"})
	if err != nil {
		panic(err) // only for a nil client
	}
	return s
}

// TestEveryPermissionHasAProof needs no apiserver: the files parse, stay within
// plain verbs on named resources, and every permission has a proof.
func TestEveryPermissionHasAProof(t *testing.T) {
	cr, r := ClusterRole(), Role("faultline")
	if cr.Name != Name || r.Name != Name || r.Namespace != "faultline" || cr.Namespace != "" {
		t.Fatalf("names: %s, %s/%s", cr.Name, r.Namespace, r.Name)
	}
	seen := map[atom]bool{}
	for _, rules := range [][]rbacv1.PolicyRule{cr.Rules, r.Rules} {
		for _, rule := range rules {
			if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
				t.Errorf("rule %+v: resourceNames and nonResourceURLs are not expected", rule)
			}
		}
		for _, a := range atoms(rules) {
			if a.group == "*" || a.resource == "*" || a.verb == "*" || strings.Contains(a.resource, "secret") {
				t.Errorf("%s: no wildcards, no secrets", a)
			}
			if seen[a] {
				t.Errorf("%s granted twice", a)
			}
			seen[a] = true
			if _, ok := proofs[a]; !ok {
				t.Errorf("%s has no proof that the controller needs it: add one to proofs", a)
			}
		}
	}
	for a := range proofs {
		if !seen[a] {
			t.Errorf("proof for %s, which neither role grants: the controller would fail", a)
		}
	}
	// The Role must hold exactly the namespaced needs, the ClusterRole the rest.
	for _, a := range atoms(r.Rules) {
		if a.resource != "leases" && a.resource != "configmaps" {
			t.Errorf("Role grants %s: cluster-scoped needs go in the ClusterRole", a)
		}
	}
	for _, a := range atoms(cr.Rules) {
		if a.resource == "leases" || a.resource == "configmaps" {
			t.Errorf("ClusterRole grants %s in every namespace: it belongs in the Role", a)
		}
	}
	if !strings.Contains(string(ClusterRoleYAML), "kind: ClusterRole") || !strings.Contains(string(RoleYAML), "kind: Role") {
		t.Errorf("embedded files are not the roles")
	}
}

package rbac

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/rules/stepspec"
)

// atom is one permission: a verb on a resource of an API group, limited to the
// object name when name is set (resourceNames).
type atom struct{ group, resource, verb, name string }

func (a atom) String() string {
	g := a.group
	if g == "" {
		g = "core"
	}
	s := g + "/" + a.resource + ":" + a.verb
	if a.name != "" {
		s += "@" + a.name
	}
	return s
}

// atoms expands rules into single permissions, of the ClusterRole or the Role.
func atoms(rules []rbacv1.PolicyRule) []atom {
	var out []atom
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, atom{g, res, v, n})
					}
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
			r := rbacv1.PolicyRule{APIGroups: []string{a.group}, Resources: []string{a.resource}, Verbs: []string{a.verb}}
			if a.name != "" {
				r.ResourceNames = []string{a.name}
			}
			out = append(out, r)
		}
	}
	return out
}

// namedObjects are the objects the controller reads and writes by name, by
// resource: the names it uses by default (controller.Config). A rule limited by
// resourceNames may name only these, so the Role cannot drift from the code.
var namedObjects = map[string]string{
	"leases":     controller.DefaultLeaseName,
	"configmaps": controller.DefaultCheckpointName,
}

// unnameable are the verbs RBAC cannot limit by name: the object does not exist
// yet (create) or the request names none (list, watch, deletecollection).
var unnameable = map[string]bool{"create": true, "list": true, "watch": true, "deletecollection": true}

// fixture is what the proofs act on; the admin client prepares everything a proof
// needs but the one permission it proves.
type fixture struct {
	admin   kubernetes.Interface
	ns      string // the controller's namespace
	podNS   string // a namespace of workloads, where a fault's pods run
	node    string
	event   string // an Event in "default" on node
	nsEvent string // an Event in ns on the controller's Pod
	lease   string // the controller's Lease in ns
	cm      string // the controller's checkpoint ConfigMap in ns
	nf      string // a NodeFault (pack "proof", rule "proof" on node)
	seq     atomic.Int64
}

func (f *fixture) next() int64 { return f.seq.Add(1) }

// proof performs, with the controller's client sa, the one call of the controller
// that needs a permission.
type proof struct {
	why string
	run func(ctx context.Context, f *fixture, sa kubernetes.Interface) error
}

// everyNamespace are the namespaced permissions, beyond the steps', that the
// controller needs wherever a fault's pods run: the GPU pods' informer, their
// owners, and the Event on each pod a fault touched.
var everyNamespace = map[atom]bool{
	{"", "pods", "watch", ""}:          true,
	{"apps", "replicasets", "get", ""}: true,
	{"batch", "jobs", "get", ""}:       true,
	{"", "events", "create", ""}:       true,
	{"", "events", "patch", ""}:        true,
}

// proofs maps the permissions of the ClusterRole and the Role to a call the
// controller makes with it; a permission only a remediation step needs is proven
// by the step's spec instead (stepProofs). A permission without a proof fails
// TestEveryPermissionHasAProof.
var proofs = map[atom]proof{
	{"", "pods", "list", ""}: {"the drain step lists the node's pods in every namespace (and the agent pods' informer lists its namespace's)", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		if _, err := sa.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=probe-agent", Limit: 1}); err != nil {
			return err
		}
		_, err := sa.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + f.node, Limit: 1})
		return err
	}},
	{"", "nodes", "list", ""}: {"the Node informer lists", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}},
	{"", "nodes", "watch", ""}: {"the Node informer watches", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		sec := int64(1)
		w, err := sa.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{TimeoutSeconds: &sec})
		if err == nil {
			w.Stop()
		}
		return err
	}},
	{"", "nodes", "get", ""}: {"a Node is re-read from the API after a write conflict", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().Nodes().Get(ctx, f.node, metav1.GetOptions{})
		return err
	}},
	{"", "nodes", "patch", ""}: {"taint, pointer annotation and labels: a merge patch guarded by the resourceVersion", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		n, err := f.admin.CoreV1().Nodes().Get(ctx, f.node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{"rbac-test/seq":"%d"}}}`, n.ResourceVersion, f.next())
		_, err = sa.CoreV1().Nodes().Patch(ctx, f.node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}},
	{"", "nodes/status", "patch", ""}: {"the node condition: strategic merge patch of nodes/status", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"FaultlineFault","status":"False","reason":"NoFault","message":"%d"}]}}`, f.next())
		_, err := sa.CoreV1().Nodes().Patch(ctx, f.node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		return err
	}},
	{"", "events", "create", ""}: {"the event recorder creates Events where their object is: a Node's in default, the controller's Pod's in its namespace, a faulty node's pod's in that pod's", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		for _, e := range []struct {
			ns     string
			object corev1.ObjectReference
			reason string
		}{
			{metav1.NamespaceDefault, corev1.ObjectReference{Kind: "Node", Name: f.node}, "FaultEvent"},
			{f.ns, corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: "faultline-controller-0"}, "PackReloadFailed"},
			{f.podNS, corev1.ObjectReference{Kind: "Pod", Namespace: f.podNS, Name: "train-0"}, "NodeFault"},
		} {
			if _, err := sa.CoreV1().Events(e.ns).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.proof%d", e.object.Name, f.next())},
				InvolvedObject: e.object, Reason: e.reason, Message: "proof", Type: corev1.EventTypeWarning, Count: 1,
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}},
	{"", "events", "patch", ""}: {"the event recorder patches an Event it counts again (about a Node in default, the controller's Pod in its namespace)", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		patch := fmt.Sprintf(`{"count":%d,"message":"proof"}`, f.next()+1)
		if _, err := sa.CoreV1().Events(metav1.NamespaceDefault).Patch(ctx, f.event, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
		_, err := sa.CoreV1().Events(f.ns).Patch(ctx, f.nsEvent, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}},
	{"apps", "replicasets", "get", ""}: {"a GPU pod's ReplicaSet is read for its owner (its Deployment)", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.AppsV1().ReplicaSets(f.podNS).Get(ctx, "proof-absent", metav1.GetOptions{})
		return allowed(err)
	}},
	{"batch", "jobs", "get", ""}: {"a GPU pod's Job is read for its owner (its CronJob, JobSet, ...)", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.BatchV1().Jobs(f.podNS).Get(ctx, "proof-absent", metav1.GetOptions{})
		return allowed(err)
	}},
	{"faultline.io", "nodefaults", "get", ""}: {"a record is read before it is updated", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).Get(ctx, nodefault.Name(f.node, "proof", "proof"))
		return err
	}},
	{"faultline.io", "nodefaults", "list", ""}: {"a new leader resumes held faults; resolved ones are collected", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).List(ctx)
		return err
	}},
	{"faultline.io", "nodefaults", "watch", ""}: {"the NodeFault informer watches (taint ownership, facts)", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		body, err := sa.CoreV1().RESTClient().Get().AbsPath("/apis/faultline.io/v1alpha1/nodefaults").
			Param("watch", "true").Param("timeoutSeconds", "1").Stream(ctx)
		if err == nil {
			_ = body.Close()
		}
		return err
	}},
	{"faultline.io", "nodefaults", "create", ""}: {"a fault's record is opened", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).Record(ctx, f.node, "proof", fmt.Sprint("new-", f.next()), nodefault.Change{Phase: v1alpha1.PhaseObserved, Cause: nodefault.CauseAnnotate})
		return err
	}},
	{"faultline.io", "nodefaults/status", "update", ""}: {"a record's status follows the fault", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := store(sa).Record(ctx, f.node, "proof", "proof", nodefault.Change{Decision: fmt.Sprint("proof-", f.next())})
		return err
	}},
	{"faultline.io", "nodefaults", "delete", ""}: {"a resolved record is collected after its retention", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		// Resolved (as admin) a year ago, by the clock of the collecting store.
		rule := fmt.Sprint("old-", f.next())
		if _, err := store(f.admin).Record(ctx, f.node, "proof", rule, nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint}); err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		st, _ := nodefault.New(sa, nodefault.Options{Retention: time.Hour, Now: func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }})
		_, err := st.Collect(ctx)
		return err
	}},
	{"faultline.io", "proberuns", "list", ""}: {"the leader's ProbeRun informer lists the runs", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		return probeRuns(sa).Get().Resource(v1alpha1.ProbeRunResource).Param("limit", "1").Do(ctx).Error()
	}},
	{"faultline.io", "proberuns", "watch", ""}: {"the leader's ProbeRun informer watches the runs", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		body, err := probeRuns(sa).Get().Resource(v1alpha1.ProbeRunResource).Param("watch", "true").Param("timeoutSeconds", "1").Stream(ctx)
		if err == nil {
			_ = body.Close()
		}
		return err
	}},
	{"faultline.io", "proberuns", "create", ""}: {"a run the controller starts itself (rule, recovery, schedule) is recorded as a ProbeRun", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		pr := &v1alpha1.ProbeRun{ObjectMeta: metav1.ObjectMeta{GenerateName: "rule-", Annotations: map[string]string{v1alpha1.AnnotationRecord: "proof"}},
			Spec: v1alpha1.ProbeRunSpec{Nodes: []string{f.node}, Checks: []string{"nvml"}, Trigger: "rule"}}
		return probeRuns(sa).Post().Resource(v1alpha1.ProbeRunResource).Param("dryRun", "All").Body(pr).Do(ctx).Error()
	}},
	{"faultline.io", "proberuns", "delete", ""}: {"a finished run is deleted after its retention", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		return allowed(probeRuns(sa).Delete().Resource(v1alpha1.ProbeRunResource).Name("proof-absent").Do(ctx).Error())
	}},
	{"faultline.io", "proberuns/status", "update", ""}: {"what a run found is written to its status", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		pr := &v1alpha1.ProbeRun{ObjectMeta: metav1.ObjectMeta{Name: "proof-absent"}, Spec: v1alpha1.ProbeRunSpec{Checks: []string{"nvml"}}}
		return allowed(probeRuns(sa).Put().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).SubResource("status").Body(pr).Do(ctx).Error())
	}},
	{"coordination.k8s.io", "leases", "get", controller.DefaultLeaseName}: {"leader election reads the Lease", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoordinationV1().Leases(f.ns).Get(ctx, f.lease, metav1.GetOptions{})
		return err
	}},
	{"coordination.k8s.io", "leases", "create", ""}: {"leader election creates the Lease the first time", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoordinationV1().Leases(f.ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proof-%d", f.next())}}, metav1.CreateOptions{})
		return err
	}},
	{"coordination.k8s.io", "leases", "update", controller.DefaultLeaseName}: {"leader election renews or takes over the Lease", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		l, err := f.admin.CoordinationV1().Leases(f.ns).Get(ctx, f.lease, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		id := fmt.Sprint("proof-", f.next())
		l.Spec.HolderIdentity = &id
		_, err = sa.CoordinationV1().Leases(f.ns).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}},
	{"", "pods", "watch", ""}: {"the GPU pods' informer watches the bound pods of every namespace (and the agent pods' its namespace's)", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		sec := int64(1)
		for _, o := range []struct{ ns, labels, fields string }{
			{metav1.NamespaceAll, "", "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"},
			{f.ns, "app.kubernetes.io/component=probe-agent", ""},
		} {
			w, err := sa.CoreV1().Pods(o.ns).Watch(ctx, metav1.ListOptions{LabelSelector: o.labels, FieldSelector: o.fields, TimeoutSeconds: &sec})
			if err != nil {
				return err
			}
			w.Stop()
		}
		return nil
	}},
	{"", "configmaps", "get", controller.DefaultCheckpointName}: {"the checkpoint is loaded", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().ConfigMaps(f.ns).Get(ctx, f.cm, metav1.GetOptions{})
		return err
	}},
	{"", "configmaps", "create", ""}: {"the checkpoint is created the first time", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		_, err := sa.CoreV1().ConfigMaps(f.ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proof-%d", f.next())}}, metav1.CreateOptions{})
		return err
	}},
	{"", "configmaps", "update", controller.DefaultCheckpointName}: {"the checkpoint advances", func(ctx context.Context, f *fixture, sa kubernetes.Interface) error {
		cm, err := f.admin.CoreV1().ConfigMaps(f.ns).Get(ctx, f.cm, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		cm.Data = map[string]string{"position-unix-nano": fmt.Sprint(f.next())}
		_, err = sa.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}},
}

// stepAtoms are the permissions the remediation steps' specs (rules/stepspec) say
// their Do needs, with why: cluster-wide (a node's pods run in any namespace).
func stepAtoms() map[atom]string {
	out := map[atom]string{}
	for _, s := range stepspec.All() {
		for _, a := range s.Access {
			for _, v := range a.Verbs {
				out[atom{a.Group, a.Resource, v, ""}] = "the " + s.Name + " step: " + a.Why
			}
		}
	}
	return out
}

// allProofs are proofs and, for each permission only steps need, a proof made
// from the step's spec: the request of its verb on its resource (an object that
// does not exist: the authorizer answers before the object is looked up).
func allProofs() map[atom]proof {
	out := maps.Clone(proofs)
	for a, why := range stepAtoms() {
		if _, ok := out[a]; !ok {
			out[a] = proof{why, func(ctx context.Context, f *fixture, sa kubernetes.Interface) error { return request(ctx, f, sa, a) }}
		}
	}
	return out
}

// request makes the request of a's verb on a's resource as sa, on an object
// named proof-absent in namespace default (when the resource is namespaced);
// only a refusal (Forbidden) or a failed request is an error.
func request(ctx context.Context, f *fixture, sa kubernetes.Interface, a atom) error {
	res, sub, _ := strings.Cut(a.resource, "/")
	lists, err := f.admin.Discovery().ServerPreferredResources()
	if err != nil {
		return fmt.Errorf("admin: discovery: %w", err)
	}
	path := ""
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || gv.Group != a.group {
			continue
		}
		for _, r := range l.APIResources {
			if r.Name != res {
				continue
			}
			path = "/apis/" + l.GroupVersion
			if gv.Group == "" {
				path = "/api/" + gv.Version
			}
			if r.Namespaced {
				path += "/namespaces/" + metav1.NamespaceDefault
			}
			path += "/" + res
		}
	}
	if path == "" {
		return fmt.Errorf("%s: no such resource on the server", a)
	}
	one := path + "/proof-absent"
	if sub != "" {
		one += "/" + sub
	}
	rc := sa.CoreV1().RESTClient()
	switch a.verb {
	case "get":
		err = rc.Get().AbsPath(one).Do(ctx).Error()
	case "list":
		err = rc.Get().AbsPath(path).Param("limit", "1").Do(ctx).Error()
	case "watch":
		var body io.ReadCloser
		if body, err = rc.Get().AbsPath(path).Param("watch", "true").Param("timeoutSeconds", "1").Stream(ctx); err == nil {
			_ = body.Close()
		}
	case "create":
		at := path
		if sub != "" {
			at = one
		}
		err = rc.Post().AbsPath(at).Body([]byte("{}")).SetHeader("Content-Type", "application/json").Do(ctx).Error()
	case "update":
		err = rc.Put().AbsPath(one).Body([]byte("{}")).SetHeader("Content-Type", "application/json").Do(ctx).Error()
	case "patch":
		err = rc.Patch(types.MergePatchType).AbsPath(one).Body([]byte("{}")).Do(ctx).Error()
	case "delete":
		err = rc.Delete().AbsPath(one).Do(ctx).Error()
	default:
		return fmt.Errorf("%s: no request for verb %s", a, a.verb)
	}
	if apierrors.IsForbidden(err) {
		return err
	}
	var st apierrors.APIStatus
	if err != nil && !errors.As(err, &st) {
		return err // not an answer of the server
	}
	return nil
}

// allowed is err unless the server answered NotFound: the request was allowed.
func allowed(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func probeRuns(c kubernetes.Interface) rest.Interface {
	rc, err := v1alpha1.NewRESTClient(c)
	if err != nil {
		panic(err) // only for a client without a REST client
	}
	return rc
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
	proofs := allProofs()
	seen := map[atom]bool{}
	for _, rules := range [][]rbacv1.PolicyRule{cr.Rules, r.Rules} {
		for _, rule := range rules {
			if len(rule.NonResourceURLs) > 0 {
				t.Errorf("rule %+v: nonResourceURLs are not expected", rule)
			}
		}
		for _, a := range atoms(rules) {
			// A name must be one the controller uses, on a verb RBAC limits by name;
			// and whatever the controller reads or writes by name is limited to it.
			want, byName := namedObjects[a.resource]
			switch {
			case a.name != "" && (!byName || a.name != want):
				t.Errorf("%s: the controller uses no %s named %q (it uses %v)", a, a.resource, a.name, namedObjects)
			case a.name != "" && unnameable[a.verb]:
				t.Errorf("%s: RBAC cannot limit %s by name", a, a.verb)
			case a.name == "" && byName && !unnameable[a.verb]:
				t.Errorf("%s: limit it to the controller's own %s (resourceNames: [%s])", a, a.resource, want)
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
	namespaced := map[string]bool{"leases": true, "configmaps": true, "pods": true, "events": true, "replicasets": true, "jobs": true}
	for _, a := range atoms(r.Rules) {
		if !namespaced[a.resource] {
			t.Errorf("Role grants %s: cluster-scoped needs go in the ClusterRole", a)
		}
	}
	// A step acts on a node's pods wherever they run: what its spec needs is
	// granted in every namespace, and nothing else that is namespaced is.
	steps := stepAtoms()
	granted := map[atom]bool{}
	for _, a := range atoms(cr.Rules) {
		granted[a] = true
		if _, step := steps[a]; namespaced[a.resource] && !step && !everyNamespace[a] {
			t.Errorf("ClusterRole grants %s in every namespace: it belongs in the Role", a)
		}
	}
	for a, why := range steps {
		if !granted[a] {
			t.Errorf("%s (%s) is not granted by the ClusterRole: add it to clusterrole.yaml", a, why)
		}
	}
	if !strings.Contains(string(ClusterRoleYAML), "kind: ClusterRole") || !strings.Contains(string(RoleYAML), "kind: Role") {
		t.Errorf("embedded files are not the roles")
	}
}

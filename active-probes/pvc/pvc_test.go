package pvc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/active-probes/pvc"
	"github.com/faultline-dev/faultline/test/testenv"
)

// ns is the controller's namespace in the tests; other exists but grants nothing.
const (
	ns    = "faultline"
	other = "elsewhere"
)

type fixture struct {
	env   *testenv.Env
	admin kubernetes.Interface
	pvs   atomic.Int32
}

// setup: the real apiserver and kube-controller-manager (its volume binder), a class
// "manual" whose volumes are pre-created (no provisioner) and a class "empty" that has
// none; both bind immediately, not on first consumer.
func setup(t *testing.T) *fixture {
	env := testenv.Start(t, testenv.Options{Kubernetes: true, ControllerManager: true})
	f := &fixture{env: env, admin: env.Clientset()}
	ctx := context.Background()
	for _, n := range []string{ns, other} {
		if _, err := f.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	immediate := storagev1.VolumeBindingImmediate
	for _, name := range []string{"manual", "empty"} {
		_, err := f.admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &immediate}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// volume adds a 1Gi hostPath volume of class manual (each binds once) and returns its name.
func (f *fixture) volume(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("pv-%d", f.pvs.Add(1))
	_, err := f.admin.CoreV1().PersistentVolumes().Create(context.Background(), &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:       "manual",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/faultline-" + name}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// asRole returns a client of a ServiceAccount bound, in ns, to a Role with rules.
func (f *fixture) asRole(t *testing.T, sa string, rules []rbacv1.PolicyRule) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	token := f.env.ServiceAccountToken(t, ns, sa)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rules}
	if _, err := f.admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := f.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(f.env.RESTConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	f.waitAllowed(t, sa, rules)
	return c
}

// waitAllowed waits until the apiserver's authorizer, whose view of RBAC objects
// lags a little behind their creation, grants the ServiceAccount every rule.
func (f *fixture) waitAllowed(t *testing.T, sa string, rules []rbacv1.PolicyRule) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for {
						sar, err := f.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
							Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + ns + ":" + sa,
								Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
								ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: g, Resource: res, Verb: v}},
						}, metav1.CreateOptions{})
						if err != nil {
							t.Fatal(err)
						}
						if sar.Status.Allowed {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s is not granted %s %s/%s", sa, v, g, res)
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
			}
		}
	}
}

// roleRules are the rules of role.yaml, as the chart installs them.
func roleRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	var r rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(pvc.RoleYAML), &r); err != nil {
		t.Fatal(err)
	}
	if r.Kind != "Role" || len(r.Rules) == 0 {
		t.Fatalf("role.yaml: %+v", r)
	}
	return r.Rules
}

// runner is the controller's arrangement: a registry of its own with the pvc Spec.
func runner(client kubernetes.Interface, metrics *probe.Metrics) *probe.Runner {
	reg := probe.NewRegistry()
	reg.MustRegister(pvc.Spec(client, ns))
	return probe.NewRunner(reg, probe.Config{}, metrics)
}

// claims lists the claims in ns and other.
func (f *fixture) claims(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, n := range []string{ns, other} {
		l, err := f.admin.CoreV1().PersistentVolumeClaims(n).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range l.Items {
			out = append(out, n+"/"+c.Name)
		}
	}
	return out
}

// waitNoClaims waits until no claim is left (a claim whose deletion was accepted goes
// when kube-controller-manager removes its protection finalizer).
func (f *fixture) waitNoClaims(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(f.claims(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: claims left behind: %v", what, f.claims(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deleteAll removes, as the admin, whatever a case left so that the next starts clean.
func (f *fixture) deleteAll(t *testing.T) {
	t.Helper()
	for _, n := range []string{ns, other} {
		err := f.admin.CoreV1().PersistentVolumeClaims(n).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	f.waitNoClaims(t, "admin cleanup")
}

// hooked is a client whose claims' Create and Watch can be intercepted, to stand for
// a bug in the wait (a panic) or a response lost on its way back.
type hooked struct {
	kubernetes.Interface
	create func(ctx context.Context, c *corev1.PersistentVolumeClaim, err error) (*corev1.PersistentVolumeClaim, error)
	watch  func()
}

func (c hooked) CoreV1() typedcorev1.CoreV1Interface { return hookedCore{c.Interface.CoreV1(), c} }

type hookedCore struct {
	typedcorev1.CoreV1Interface
	h hooked
}

func (c hookedCore) PersistentVolumeClaims(namespace string) typedcorev1.PersistentVolumeClaimInterface {
	return hookedClaims{c.CoreV1Interface.PersistentVolumeClaims(namespace), c.h}
}

type hookedClaims struct {
	typedcorev1.PersistentVolumeClaimInterface
	h hooked
}

func (c hookedClaims) Create(ctx context.Context, claim *corev1.PersistentVolumeClaim, o metav1.CreateOptions) (*corev1.PersistentVolumeClaim, error) {
	created, err := c.PersistentVolumeClaimInterface.Create(ctx, claim, o)
	if c.h.create != nil {
		return c.h.create(ctx, created, err)
	}
	return created, err
}

func (c hookedClaims) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if c.h.watch != nil {
		c.h.watch()
	}
	return c.PersistentVolumeClaimInterface.Watch(ctx, o)
}

// cancelOnClaim cancels once the probe's claim exists (seen with a watch started
// before the run): while the probe waits for Bound, or while its create request is
// still on its way back.
func (f *fixture) cancelOnClaim(t *testing.T, cancel context.CancelFunc) {
	t.Helper()
	w, err := f.admin.CoreV1().PersistentVolumeClaims(ns).Watch(context.Background(),
		metav1.ListOptions{LabelSelector: pvc.LabelProbe + "=" + pvc.Name})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				cancel()
				return
			}
		}
	}()
}

// gauge returns the value of a probe metric with the given labels, if recorded.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// The probe as the controller's ServiceAccount bound to exactly the Role of role.yaml,
// through a probe.Runner as the controller runs it, against the real apiserver and
// kube-controller-manager. Every case ends with no claim left.
func TestPVCProbe(t *testing.T) {
	f := setup(t)
	sa := f.asRole(t, "controller", roleRules(t))

	cases := []struct {
		name   string
		params probe.Params
		volume bool // a volume of class manual is there to bind
		// client, when set, replaces the ServiceAccount's client; cancel cancels
		// the caller's context.
		client func(sa kubernetes.Interface, cancel context.CancelFunc) kubernetes.Interface
		// cancel the caller's context once the claim exists.
		cancel bool
		// runnerTimeout overrides the Runner's timeout for the check.
		runnerTimeout time.Duration
		status        probe.Status
		message       []string
		min, max      time.Duration
		// cleaned: the probe itself waited until the claim was gone, so none is left
		// the moment Run returns.
		cleaned bool
	}{
		{name: "bindable class passes", params: probe.Params{"storage_class": "manual"}, volume: true,
			status: probe.StatusPass, message: []string{"class manual: faultline-probe-", "bound to pv-"}, max: 15 * time.Second, cleaned: true},
		{name: "class without volumes fails after the timeout", params: probe.Params{"storage_class": "empty", "timeout": "3s"},
			status: probe.StatusFail, message: []string{"class empty: ", "not bound after 3s (phase Pending)", "ProvisioningFailed: "},
			min: 3 * time.Second, max: 15 * time.Second, cleaned: true},
		{name: "caller cancelled mid-wait", params: probe.Params{"storage_class": "empty", "timeout": "60s"}, cancel: true,
			status: probe.StatusError, message: []string{"context canceled"}, max: 10 * time.Second},
		{name: "runner timeout before the bind timeout", params: probe.Params{"storage_class": "empty", "timeout": "60s"},
			runnerTimeout: 2 * time.Second, status: probe.StatusError, message: []string{"timed out after 2s"}, min: 2 * time.Second, max: 10 * time.Second},
		{name: "caller cancelled while the create is on its way back", params: probe.Params{"storage_class": "empty", "timeout": "60s"},
			client: func(sa kubernetes.Interface, cancel context.CancelFunc) kubernetes.Interface {
				// The apiserver created the claim; then the caller went away, and a
				// request on the caller's context would have lost the response.
				return hooked{Interface: sa, create: func(ctx context.Context, c *corev1.PersistentVolumeClaim, err error) (*corev1.PersistentVolumeClaim, error) {
					cancel()
					if err == nil {
						err = ctx.Err()
					}
					return c, err
				}}
			},
			status: probe.StatusError, message: []string{"context canceled"}, max: 10 * time.Second},
		{name: "panic mid-wait", params: probe.Params{"storage_class": "empty", "timeout": "60s"},
			client: func(sa kubernetes.Interface, _ context.CancelFunc) kubernetes.Interface {
				var fired atomic.Bool
				return hooked{Interface: sa, watch: func() {
					if fired.CompareAndSwap(false, true) {
						panic("watch exploded")
					}
				}}
			},
			status: probe.StatusError, message: []string{"panicked: watch exploded"}, max: 10 * time.Second},
		{name: "namespace without the Role is forbidden", params: probe.Params{"storage_class": "manual", "namespace": other},
			status: probe.StatusError, message: []string{"forbidden"}, max: 10 * time.Second, cleaned: true},
		{name: "missing namespace is an error", params: probe.Params{"storage_class": "manual", "namespace": "no-such-namespace"},
			client: func(kubernetes.Interface, context.CancelFunc) kubernetes.Interface { return f.admin }, status: probe.StatusError,
			message: []string{`namespaces "no-such-namespace" not found`}, max: 10 * time.Second, cleaned: true},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			var volume string
			if tc.volume {
				volume = f.volume(t)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := sa
			if tc.client != nil {
				client = tc.client(sa, cancel)
			}
			reg := prometheus.NewRegistry()
			r := runner(client, probe.NewMetrics(reg))
			r.SetTimeout(pvc.Name, tc.runnerTimeout)
			if tc.cancel {
				f.cancelOnClaim(t, cancel)
			}

			t0 := time.Now()
			res, err := r.Run(ctx, pvc.Name, tc.params)
			took := time.Since(t0)
			if err != nil {
				t.Fatal(err)
			}
			left := f.claims(t)
			t.Logf("%s in %s: %s", res.Status, took.Round(time.Millisecond), res.Message)

			if res.Status != tc.status || res.Check != "pvc" || res.Node != "" {
				t.Errorf("result: %+v", res)
			}
			for _, m := range tc.message {
				if !strings.Contains(res.Message, m) {
					t.Errorf("message %q lacks %q", res.Message, m)
				}
			}
			if took < tc.min || took > tc.max {
				t.Errorf("took %s, want %s..%s", took, tc.min, tc.max)
			}
			if tc.cleaned && len(left) > 0 {
				t.Errorf("claims left when Run returned: %v", left)
			}
			f.waitNoClaims(t, tc.name)

			if res.Status == probe.StatusPass || res.Status == probe.StatusFail {
				if len(res.Devices) != 1 || res.Devices[0].ID != tc.params["storage_class"] || res.Devices[0].Status != res.Status {
					t.Fatalf("devices: %+v", res.Devices)
				}
				d := res.Devices[0]
				if d.Values["delete_seconds"] <= 0 {
					t.Errorf("values %v", d.Values)
				}
				if v, ok := gauge(t, reg, "faultline_probe_result", map[string]string{"check": "pvc", "device": d.ID}); !ok || v != map[probe.Status]float64{probe.StatusPass: 1}[res.Status] {
					t.Errorf("faultline_probe_result{device=%q} = %v (recorded %v)", d.ID, v, ok)
				}
				if v, ok := gauge(t, reg, "faultline_probe_value", map[string]string{"check": "pvc", "device": d.ID, "metric": "delete_seconds"}); !ok || v != d.Values["delete_seconds"] {
					t.Errorf("faultline_probe_value delete_seconds = %v (recorded %v)", v, ok)
				}
			}
			if res.Status == probe.StatusPass {
				d := res.Devices[0]
				t.Logf("measured: bind_seconds %.3f, delete_seconds %.3f", d.Values["bind_seconds"], d.Values["delete_seconds"])
				if d.Values["bind_seconds"] <= 0 {
					t.Errorf("values %v", d.Values)
				}
				if v, ok := gauge(t, reg, "faultline_probe_value", map[string]string{"check": "pvc", "device": d.ID, "metric": "bind_seconds"}); !ok || v != d.Values["bind_seconds"] {
					t.Errorf("faultline_probe_value bind_seconds = %v (recorded %v)", v, ok)
				}
				// kube-controller-manager really bound the claim to the volume.
				pv, err := f.admin.CoreV1().PersistentVolumes().Get(context.Background(), volume, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns || !strings.HasPrefix(pv.Spec.ClaimRef.Name, "faultline-probe-") ||
					!strings.Contains(res.Message, pv.Spec.ClaimRef.Name+" bound to "+volume) {
					t.Errorf("volume %s claimed by %+v; message %q", volume, pv.Spec.ClaimRef, res.Message)
				}
			}
		})
	}
}

// The Spec is the controller's to add: not in the agent's registry, not run by
// default, not invasive; its defaults are the documented ones.
func TestSpec(t *testing.T) {
	if _, ok := probe.Default().Get(pvc.Name); ok {
		t.Error("pvc is registered in the node probes' default registry")
	}
	s := pvc.Spec(nil, ns)
	p, err := s.Params.Resolve(probe.Params{"storage_class": "fast-nvme"})
	if err != nil {
		t.Fatal(err)
	}
	want := probe.Params{"storage_class": "fast-nvme", "size": "1Gi", "namespace": ns, "timeout": "2m", "access_mode": "ReadWriteOnce"}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("resolved %v, want %v", p, want)
	}
	if s.Name != "pvc" || s.DefaultEnabled || s.IsInvasive(p) || s.Timeout(p) != 2*time.Minute+45*time.Second {
		t.Errorf("spec: %+v (timeout %s)", s, s.Timeout(p))
	}
	if pr, ok := s.New(probe.Config{}).(*pvc.Probe); !ok || pr == nil {
		t.Errorf("New: %T", s.New(probe.Config{}))
	}
	// Without a namespace of its own, a run must name one.
	if _, err := pvc.Spec(nil, "").Params.Resolve(probe.Params{"storage_class": "fast"}); err == nil {
		t.Error("namespace not required when the Spec has none")
	}
}

// Parameters are checked before anything is created: a *probe.ParamError naming the
// parameter, and no call to the API (the client is nil).
func TestPVCParams(t *testing.T) {
	prom := prometheus.NewRegistry()
	r := runner(nil, probe.NewMetrics(prom))
	for _, tc := range []struct {
		params probe.Params
		bad    string
	}{
		{probe.Params{}, "storage_class"},
		{probe.Params{"storage_class": "Bad_Class"}, "storage_class"},
		{probe.Params{"storage_class": "-fast"}, "storage_class"},
		{probe.Params{"storage_class": strings.Repeat("a", 254)}, "storage_class"},
		{probe.Params{"storage_class": "fast", "size": "lots"}, "size"},
		{probe.Params{"storage_class": "fast", "size": "-1Gi"}, "size"},
		{probe.Params{"storage_class": "fast", "size": "0"}, "size"},
		{probe.Params{"storage_class": "fast", "size": "101Gi"}, "size"},
		{probe.Params{"storage_class": "fast", "size": "1Pi"}, "size"},
		{probe.Params{"storage_class": "fast", "namespace": "-x"}, "namespace"},
		{probe.Params{"storage_class": "fast", "namespace": "a.b"}, "namespace"},
		{probe.Params{"storage_class": "fast", "access_mode": "ReadWriteSometimes"}, "access_mode"},
		{probe.Params{"storage_class": "fast", "timeout": "2h"}, "timeout"},
		{probe.Params{"storage_class": "fast", "timeout": "0s"}, "timeout"},
		{probe.Params{"storage_class": "fast", "timeout": "soon"}, "timeout"},
		{probe.Params{"storage_class": "fast", "storageClass": "fast"}, "storageClass"},
	} {
		_, err := r.Run(context.Background(), pvc.Name, tc.params)
		var pe *probe.ParamError
		if !errors.As(err, &pe) || pe.Param != tc.bad {
			t.Errorf("%v: want a parameter error for %s, got %v", tc.params, tc.bad, err)
		}
	}
	if n, err := testutil.GatherAndCount(prom, "faultline_probe_runs_total", "faultline_probe_result"); err != nil || n != 0 {
		t.Errorf("refused runs recorded: %d samples (%v)", n, err)
	}
}

// Leftovers of a probe that never finished are swept when older than the age given;
// younger ones and claims of others are never touched; a run sweeps first.
func TestSweep(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	class := "empty"
	mk := func(name string, labels map[string]string) {
		_, err := f.admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &class,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	ours := map[string]string{pvc.LabelManagedBy: "faultline", pvc.LabelProbe: pvc.Name}
	mk("faultline-probe-leftover", ours)
	mk("training-data", map[string]string{"app": "trainer"})
	mk("other-probe", map[string]string{pvc.LabelManagedBy: "faultline", pvc.LabelProbe: "something-else"})
	sa := f.asRole(t, "controller", roleRules(t))
	p := &pvc.Probe{Client: sa}

	// The leftover is younger than an hour: a run in progress may own it.
	swept, err := p.Sweep(ctx, ns, time.Hour)
	if err != nil || len(swept) != 0 {
		t.Fatalf("young leftover swept: %v %v", swept, err)
	}
	// Older than 0: gone; the others stay.
	swept, err = p.Sweep(ctx, ns, 0)
	if err != nil || len(swept) != 1 || swept[0] != "faultline-probe-leftover" {
		t.Fatalf("sweep: %v %v", swept, err)
	}
	want := fmt.Sprint([]string{ns + "/other-probe", ns + "/training-data"})
	waitClaims := func(what string) {
		deadline := time.Now().Add(20 * time.Second)
		for fmt.Sprint(f.claims(t)) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: claims %v, want %s", what, f.claims(t), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitClaims("after the sweep")

	// A run sweeps before it creates its claim (SweepAfter a nanosecond: everything of
	// ours is old enough), and leaves the others alone.
	mk("faultline-probe-crashed", ours)
	p.SweepAfter = time.Nanosecond
	res, err := p.Run(ctx, probe.Params{"storage_class": "empty", "namespace": ns, "timeout": "1s", "size": "1Gi", "access_mode": "ReadWriteOnce"})
	if err != nil || res.Status != probe.StatusFail {
		t.Fatalf("run: %+v %v", res, err)
	}
	waitClaims("after a run")
}

// Every permission of role.yaml is needed. With all of them the probe passes (and, on
// a class without volumes, says why it failed); without any one of them it does not
// do its job, and the result says Forbidden.
func TestRoleMinimal(t *testing.T) {
	f := setup(t)
	full := roleRules(t)
	type atom struct{ group, resource, verb string }
	var atoms []atom
	for _, r := range full {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					atoms = append(atoms, atom{g, res, v})
				}
			}
		}
	}
	if len(atoms) != 5 {
		t.Errorf("role.yaml grants %v; this test expects each of them below", atoms)
	}
	ctx := context.Background()
	reference := runner(f.asRole(t, "full", full), nil)
	f.volume(t)
	if res, err := reference.Run(ctx, pvc.Name, probe.Params{"storage_class": "manual"}); err != nil || res.Status != probe.StatusPass {
		t.Fatalf("reference run, bindable class: %+v %v", res, err)
	}
	res, err := reference.Run(ctx, pvc.Name, probe.Params{"storage_class": "empty", "timeout": "3s"})
	if err != nil || res.Status != probe.StatusFail || !strings.Contains(res.Message, "ProvisioningFailed") {
		t.Fatalf("reference run, class without volumes: %+v %v", res, err)
	}
	f.waitNoClaims(t, "reference runs")

	for i, a := range atoms {
		t.Run(a.resource+"-"+a.verb, func(t *testing.T) {
			var rules []rbacv1.PolicyRule
			for j, b := range atoms {
				if j != i {
					rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{b.group}, Resources: []string{b.resource}, Verbs: []string{b.verb}})
				}
			}
			r := runner(f.asRole(t, fmt.Sprintf("without-%d", i), rules), nil)
			switch {
			case a.resource == "events":
				// The verdict stands, but the reason is gone.
				res, _ := r.Run(ctx, pvc.Name, probe.Params{"storage_class": "empty", "timeout": "3s"})
				t.Logf("%s: %s", res.Status, res.Message)
				if res.Status != probe.StatusFail || strings.Contains(res.Message, "ProvisioningFailed") {
					t.Errorf("without %v: %+v", a, res)
				}
				f.waitNoClaims(t, "events")
			default:
				f.volume(t)
				res, _ := r.Run(ctx, pvc.Name, probe.Params{"storage_class": "manual"})
				t.Logf("%s: %s", res.Status, res.Message)
				if res.Status != probe.StatusError || !strings.Contains(res.Message, "forbidden") || !strings.Contains(res.Message, a.verb) {
					t.Errorf("without %v: %+v", a, res)
				}
				if a.verb == "delete" {
					// The claim it could not delete; nothing else can be expected.
					if left := f.claims(t); len(left) != 1 {
						t.Errorf("claims left: %v", left)
					}
				} else {
					// Whatever went wrong, a claim the probe created it deleted.
					f.waitNoClaims(t, "without "+a.verb)
				}
			}
			f.deleteAll(t)
		})
	}
}

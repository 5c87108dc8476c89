package pvc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/active-probes/pvc"
	"github.com/faultline-dev/faultline/test/testenv"
)

const ns = "faultline"

type fixture struct {
	env   *testenv.Env
	admin kubernetes.Interface
	pvs   atomic.Int32
}

// setup: the real apiserver and kube-controller-manager (its volume binder), a class
// "manual" whose volumes are pre-created (no provisioner) and a class "empty" that has
// none.
func setup(t *testing.T) *fixture {
	env := testenv.Start(t, testenv.Options{ControllerManager: true})
	f := &fixture{env: env, admin: env.Clientset()}
	ctx := context.Background()
	if _, err := f.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
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

// volume adds a 1Gi volume of class manual (each binds once).
func (f *fixture) volume(t *testing.T) {
	n := f.pvs.Add(1)
	_, err := f.admin.CoreV1().PersistentVolumes().Create(context.Background(), &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%d", n)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:       "manual",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/tmp/faultline-pv-%d", n)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// asRole returns a client of a ServiceAccount bound to rules in ns.
func (f *fixture) asRole(t *testing.T, sa string, rules []rbacv1.PolicyRule) kubernetes.Interface {
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
	return c
}

func roleRules(t *testing.T) []rbacv1.PolicyRule {
	var r rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(pvc.RoleYAML), &r); err != nil {
		t.Fatal(err)
	}
	return r.Rules
}

func runner(client kubernetes.Interface) *probe.Runner {
	reg := probe.NewRegistry()
	reg.MustRegister(pvc.Spec(client, ns))
	return probe.NewRunner(reg, probe.Config{}, nil)
}

func (f *fixture) claims(t *testing.T) []string {
	l, err := f.admin.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range l.Items {
		out = append(out, c.Name)
	}
	return out
}

func (f *fixture) waitNoClaims(t *testing.T, what string) {
	deadline := time.Now().Add(20 * time.Second)
	for len(f.claims(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: claims left behind: %v", what, f.claims(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The probe as the controller's ServiceAccount with exactly the Role of role.yaml: a
// class with a volume binds and the claim is deleted; a class without volumes fails
// after the timeout, says why, and leaves no claim; a cancelled caller leaves none.
func TestPVCProbe(t *testing.T) {
	f := setup(t)
	r := runner(f.asRole(t, "controller", roleRules(t)))
	ctx := context.Background()

	f.volume(t)
	res, err := r.Run(ctx, "pvc", probe.Params{"storage_class": "manual"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != probe.StatusPass || len(res.Devices) != 1 || res.Devices[0].ID != "manual" {
		t.Fatalf("bindable class: %+v", res)
	}
	d := res.Devices[0]
	t.Logf("pvc manual: %s; bind %.3fs, delete %.3fs", res.Message, d.Values["bind_seconds"], d.Values["delete_seconds"])
	if d.Values["bind_seconds"] <= 0 || d.Values["delete_seconds"] <= 0 {
		t.Errorf("values %v", d.Values)
	}
	f.waitNoClaims(t, "after a pass")

	t0 := time.Now()
	res, err = r.Run(ctx, "pvc", probe.Params{"storage_class": "empty", "timeout": "3s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pvc empty: %s: %s (%s)", res.Status, res.Message, time.Since(t0).Round(time.Millisecond))
	if res.Status != probe.StatusFail || !strings.Contains(res.Message, "not bound after 3s") {
		t.Errorf("class without volumes: %+v", res)
	}
	if time.Since(t0) > 20*time.Second {
		t.Errorf("a 3s timeout took %s", time.Since(t0))
	}
	f.waitNoClaims(t, "after a timeout")

	cctx, cancel := context.WithCancel(ctx)
	go func() {
		for len(f.claims(t)) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	res, _ = r.Run(cctx, "pvc", probe.Params{"storage_class": "empty", "timeout": "60s"})
	if res.Status != probe.StatusError {
		t.Errorf("cancelled caller: %+v", res)
	}
	f.waitNoClaims(t, "after the caller went away")
}

// Parameters are checked before anything is created.
func TestPVCParams(t *testing.T) {
	r := runner(nil)
	for _, p := range []probe.Params{
		{},
		{"storage_class": "Bad_Class"},
		{"storage_class": "fast", "size": "lots"},
		{"storage_class": "fast", "size": "-1Gi"},
		{"storage_class": "fast", "namespace": "-x"},
		{"storage_class": "fast", "access_mode": "ReadWriteSometimes"},
		{"storage_class": "fast", "timeout": "2h"},
	} {
		_, err := r.Run(context.Background(), "pvc", p)
		var pe *probe.ParamError
		if !errors.As(err, &pe) {
			t.Errorf("%v: want a parameter error, got %v", p, err)
		}
	}
}

// Leftovers of a probe that never finished are swept when older than the age given;
// claims of others are never touched.
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
	mk("faultline-probe-leftover", map[string]string{pvc.LabelManagedBy: "faultline", pvc.LabelProbe: pvc.Name})
	mk("training-data", map[string]string{"app": "trainer"})
	p := &pvc.Probe{Client: f.asRole(t, "controller", roleRules(t))}
	swept, err := p.Sweep(ctx, ns, time.Hour)
	if err != nil || len(swept) != 0 {
		t.Fatalf("young leftover swept: %v %v", swept, err)
	}
	swept, err = p.Sweep(ctx, ns, 0)
	if err != nil || len(swept) != 1 || swept[0] != "faultline-probe-leftover" {
		t.Fatalf("sweep: %v %v", swept, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := f.claims(t)
		if len(left) == 1 && left[0] == "training-data" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claims after the sweep: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Every permission of role.yaml is needed: without it the probe cannot do its job
// (or, for the Events, cannot say why a claim did not bind).
func TestRoleMinimal(t *testing.T) {
	f := setup(t)
	full := roleRules(t)
	type atom struct{ resource, verb string }
	var atoms []atom
	for _, r := range full {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				atoms = append(atoms, atom{res, v})
			}
		}
	}
	// The reason a claim of class "empty" does not bind, with every permission.
	ctx := context.Background()
	ref, err := runner(f.asRole(t, "full", full)).Run(ctx, "pvc", probe.Params{"storage_class": "empty", "timeout": "3s"})
	if err != nil || ref.Status != probe.StatusFail || !strings.Contains(ref.Message, "): ") {
		t.Fatalf("reference run: %+v %v", ref, err)
	}
	f.waitNoClaims(t, "reference run")
	for i, a := range atoms {
		t.Run(a.resource+"-"+a.verb, func(t *testing.T) {
			var rules []rbacv1.PolicyRule
			for j, b := range atoms {
				if j != i {
					rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{b.resource}, Verbs: []string{b.verb}})
				}
			}
			r := runner(f.asRole(t, fmt.Sprintf("without-%d", i), rules))
			if a.resource == "events" {
				res, _ := r.Run(ctx, "pvc", probe.Params{"storage_class": "empty", "timeout": "3s"})
				if strings.Contains(res.Message, "): ") {
					t.Errorf("without %v the probe still explains: %s", a, res.Message)
				}
			} else {
				f.volume(t)
				res, _ := r.Run(ctx, "pvc", probe.Params{"storage_class": "manual"})
				if res.Status == probe.StatusPass && !strings.Contains(res.Message, "deletion") {
					t.Errorf("without %v the probe still passes cleanly: %+v", a, res)
				}
			}
			// Whatever it left, an admin removes, so the next case starts clean.
			for _, c := range f.claims(t) {
				_ = f.admin.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, c, metav1.DeleteOptions{})
			}
			f.waitNoClaims(t, "cleanup")
		})
	}
}

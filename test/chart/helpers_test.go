package chart

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// chartDir is the chart, relative to the repository root.
const chartDir = "helm/faultline"

// monitoringAPI is the API version that turns on ServiceMonitors and the PrometheusRule.
const monitoringAPI = "monitoring.coreos.com/v1"

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// renderCase is one way of rendering the chart.
type renderCase struct {
	name        string
	release     string
	namespace   string
	valuesFile  string   // under testdata/, or ""
	sets        []string // --set
	apiVersions []string // --api-versions
	chart       string   // default: the repository's chart
}

// cases are the renders the tests check and apply: the defaults, the defaults with
// the Prometheus Operator's API present, and every testdata values file. Release names
// differ so that cluster-scoped objects (ClusterRoles, bindings) do not collide when
// TestApply applies them all to one apiserver.
var cases = []renderCase{
	{name: "defaults", release: "faultline", namespace: "faultline"},
	// manifests/faultline.yaml: the defaults, with the agents' signer CA and the
	// collector's and the intake's TLS Secrets left to the user (a generated key must
	// not be committed).
	{name: "manifests", release: "faultline", namespace: "faultline", sets: []string{
		"probeAgent.tls.signer.existingSecret=faultline-probe-agent-signer", "collector.tls.existingSecret=faultline-otel-collector-tls",
		"controller.intake.tls.existingSecret=faultline-controller-intake-tls"}},
	{name: "defaults-monitoring", release: "mon", namespace: "faultline-mon", apiVersions: []string{monitoringAPI}},
	{name: "existing-collector", release: "ex", namespace: "fl-existing", valuesFile: "values-existing-collector.yaml", apiVersions: []string{monitoringAPI}},
	{name: "direct-loki", release: "site", namespace: "fl-direct", valuesFile: "values-direct-loki.yaml", apiVersions: []string{monitoringAPI}},
	{name: "collector-auth", release: "gpu", namespace: "fl-auth", valuesFile: "values-collector-auth.yaml"},
	// Autopilot compatibility: the controller serves /status on its HTTPS listener.
	{name: "autopilot-status", release: "ap", namespace: "fl-ap", sets: []string{"controller.autopilotCompat.enabled=true"}},
	// cert-manager's Issuer in another namespace signs the agents' certificates; the
	// controller only approves.
	{name: "cert-manager", release: "cm", namespace: "fl-cm", sets: []string{
		"probeAgent.tls.certManager.issuer.name=probe-agents", "probeAgent.tls.certManager.issuer.namespace=pki",
		"probeAgent.tls.certManager.caBundle.secret=probe-agents-ca"}},
}

func caseNamed(t testing.TB, name string) renderCase {
	t.Helper()
	for _, c := range cases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no render case %q", name)
	return renderCase{}
}

func (c renderCase) args(root string) []string {
	chart := c.chart
	if chart == "" {
		chart = filepath.Join(root, chartDir)
	}
	args := []string{"template", c.release, chart, "--namespace", c.namespace}
	if c.valuesFile != "" {
		args = append(args, "-f", filepath.Join(root, "test", "chart", "testdata", c.valuesFile))
	}
	for _, s := range c.sets {
		args = append(args, "--set", s)
	}
	for _, a := range c.apiVersions {
		args = append(args, "--api-versions", a)
	}
	return args
}

// helm runs the pinned helm and returns its stdout; stderr goes into the error.
func helm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t, "helm"), args...)
	cmd.Dir = repoRoot(t)
	// No user configuration or repositories: only what the test passes counts.
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+tmp, "HELM_CACHE_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.Bytes(), nil
}

// render renders c and fails the test on an error.
func render(t testing.TB, c renderCase) []byte {
	t.Helper()
	out, err := helm(t, c.args(repoRoot(t))...)
	if err != nil {
		t.Fatalf("render %s: %v", c.name, err)
	}
	return out
}

// objects is a parsed render.
type objects []*unstructured.Unstructured

func parse(t testing.TB, b []byte) objects {
	t.Helper()
	var out objects
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("split rendered YAML: %v", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("rendered object without apiVersion, kind or name:\n%s", doc)
		}
		out = append(out, u)
	}
	return out
}

func (objs objects) find(kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (objs objects) ofKind(kind string) objects {
	var out objects
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (objs objects) names(kind string) []string {
	var out []string
	for _, o := range objs.ofKind(kind) {
		out = append(out, o.GetName())
	}
	sort.Strings(out)
	return out
}

// get finds kind/name and converts it into a typed object, failing when it is missing.
func get[T any](t testing.TB, objs objects, kind, name string) *T {
	t.Helper()
	u := objs.find(kind, name)
	if u == nil {
		t.Fatalf("no %s %q rendered; have %s: %v", kind, name, kind, objs.names(kind))
	}
	return convert[T](t, u)
}

func convert[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s does not convert to %T: %v", u.GetKind(), u.GetName(), out, err)
	}
	return out
}

func deployment(t testing.TB, objs objects, name string) *appsv1.Deployment {
	return get[appsv1.Deployment](t, objs, "Deployment", name)
}

func daemonSet(t testing.TB, objs objects, name string) *appsv1.DaemonSet {
	return get[appsv1.DaemonSet](t, objs, "DaemonSet", name)
}

func clusterRole(t testing.TB, objs objects, name string) *rbacv1.ClusterRole {
	return get[rbacv1.ClusterRole](t, objs, "ClusterRole", name)
}

func networkPolicy(t testing.TB, objs objects, name string) *networkingv1.NetworkPolicy {
	return get[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", name)
}

// podTemplates returns the pod templates of every workload in objs, by "Kind/name".
func podTemplates(t testing.TB, objs objects) map[string]*corev1.PodTemplateSpec {
	t.Helper()
	out := map[string]*corev1.PodTemplateSpec{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			d := convert[appsv1.Deployment](t, o)
			out["Deployment/"+o.GetName()] = &d.Spec.Template
		case "DaemonSet":
			d := convert[appsv1.DaemonSet](t, o)
			out["DaemonSet/"+o.GetName()] = &d.Spec.Template
		case "StatefulSet", "Job", "CronJob", "Pod", "ReplicaSet":
			t.Fatalf("unexpected workload kind %s %s: teach the tests about it", o.GetKind(), o.GetName())
		}
	}
	return out
}

func container(t testing.TB, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func hasArg(c *corev1.Container, arg string) bool {
	for _, a := range c.Args {
		if a == arg {
			return true
		}
	}
	return false
}

// argWithPrefix returns the first argument starting with prefix.
func argWithPrefix(c *corev1.Container, prefix string) (string, bool) {
	for _, a := range c.Args {
		if strings.HasPrefix(a, prefix) {
			return strings.TrimPrefix(a, prefix), true
		}
	}
	return "", false
}

func env(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func volume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// mountAt returns the volume mounted at path in c, and the mount.
func mountAt(spec *corev1.PodSpec, c *corev1.Container, path string) (*corev1.Volume, *corev1.VolumeMount) {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return volume(spec, c.VolumeMounts[i].Name), &c.VolumeMounts[i]
		}
	}
	return nil, nil
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chartValues reads the chart's default values.
func chartValues(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(repoRoot(t), chartDir, "values.yaml")), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// chartMeta reads Chart.yaml.
func chartMeta(t testing.TB) (version, appVersion string) {
	t.Helper()
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(repoRoot(t), chartDir, "Chart.yaml")), &c); err != nil {
		t.Fatal(err)
	}
	return c.Version, c.AppVersion
}

// lookup walks nested maps: lookup(m, "a", "b") is m["a"]["b"].
func lookup(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// selfReview asks the apiserver whether the identity of cs may do attrs.
func selfReview(ctx context.Context, cs kubernetes.Interface, attrs authorizationv1.ResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, fmt.Errorf("review %s %s.%s %q: %w", attrs.Verb, attrs.Resource, attrs.Group, attrs.Name, err)
	}
	return r.Status, nil
}

// waitAllowed waits until the identity of cs may do attrs: the authorizer learns
// new roles and bindings through informers, a moment after they are created.
func waitAllowed(t testing.TB, cs kubernetes.Interface, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	what := fmt.Sprintf("allowed to %s %s.%s/%s %q in %q", attrs.Verb, attrs.Resource, attrs.Group, attrs.Subresource, attrs.Name, attrs.Namespace)
	eventually.NoError(t, 15*time.Second, what, func() error {
		st, err := selfReview(context.Background(), cs, attrs)
		if err == nil && !st.Allowed {
			err = fmt.Errorf("denied (%s)", st.Reason)
		}
		return err
	})
}

package testenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestSmokeKubernetesTaint(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	ctx := ctxT(t, time.Minute)

	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "gpu-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Taints have no merge key: a strategic-merge patch of spec.taints replaces the list,
	// so send the existing taints (the apiserver may have added not-ready) plus ours.
	want := corev1.Taint{Key: "faultline.io/faulty", Value: "xid-79", Effect: corev1.TaintEffectNoSchedule}
	taints := append(append([]corev1.Taint(nil), n.Spec.Taints...), want)
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "gpu-1", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch taint: %v", err)
	}
	n, err = cs.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tn := range n.Spec.Taints {
		if tn.Key == want.Key && tn.Value == want.Value && tn.Effect == want.Effect {
			found = true
		}
	}
	if !found || len(n.Spec.Taints) != len(taints) {
		t.Fatalf("taints after patch = %+v, want %+v", n.Spec.Taints, taints)
	}
	t.Logf("node taints: %+v", n.Spec.Taints)

	// The kubeconfig file works for kubectl (and so for helm).
	out, err := exec.Command(testenv.Binary(t, "kubectl"), "--kubeconfig", env.Kubeconfig(),
		"get", "node", "gpu-1", "-o", "jsonpath={.spec.taints[*].key}").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "faultline.io/faulty") {
		t.Fatalf("kubectl get node: %v: %s", err, out)
	}
}

func TestSmokeControllerManagerBindsPVC(t *testing.T) {
	env := testenv.Start(t, testenv.Options{ControllerManager: true})
	cs := env.Clientset()
	ctx := ctxT(t, time.Minute)
	qty := resource.MustParse("1Gi")
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: qty},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:       "manual",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/pv-1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class := "manual"
	_, err = cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-scratch"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pvc *corev1.PersistentVolumeClaim
	eventually.NoError(t, 30*time.Second, "the claim bound", func() error {
		if pvc, err = cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "probe-scratch", metav1.GetOptions{}); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %s", pvc.Status.Phase)
		}
		return nil
	})
	if pvc.Spec.VolumeName != "pv-1" {
		t.Fatalf("claim bound to %q, want pv-1", pvc.Spec.VolumeName)
	}
}

func TestSmokeRBACRefused(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	ctx := ctxT(t, time.Minute)
	const ns, sa = "faultline", "controller"
	token := env.ServiceAccountToken(t, ns, sa)
	asSA, err := kubernetes.NewForConfig(env.RESTConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}

	_, err = asSA.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps without a Role: err = %v, want Forbidden", err)
	}
	t.Logf("refused as expected: %v", err)

	admin := env.Clientset()
	_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-configmaps"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer sees new bindings through an informer: allow it a moment.
	eventually.NoError(t, 15*time.Second, "list configmaps allowed after the RoleBinding", func() error {
		_, err := asSA.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	// Still nothing beyond the Role.
	if _, err := asSA.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list secrets: err = %v, want Forbidden", err)
	}
}

// pushLoki pushes one line.
func pushLoki(lokiURL, labels, line string, ts time.Time) error {
	return testenv.PushLoki(lokiURL, []push.Stream{{Labels: labels, Entries: []push.Entry{{Timestamp: ts, Line: line}}}})
}

// waitForLine polls Loki until query returns a line containing want, and returns its entry.
func waitForLine(t *testing.T, lokiURL, query, want string, start time.Time, timeout time.Duration) testenv.LokiEntry {
	t.Helper()
	var found testenv.LokiEntry
	eventually.NoError(t, timeout, fmt.Sprintf("a line containing %q from %s", want, query), func() error {
		got, err := testenv.QueryLoki(t.Context(), lokiURL, query, start.Add(-time.Minute), time.Now().Add(time.Minute))
		if err != nil {
			return err
		}
		for _, e := range got {
			if strings.Contains(e.Line, want) {
				found = e
				return nil
			}
		}
		return fmt.Errorf("result %+v", got)
	})
	return found
}

// hasLabels checks that got contains want; Loki 3 adds labels of its own
// (service_name, detected_level), which are allowed.
func hasLabels(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stream labels %v: %s=%q, want %q", got, k, got[k], v)
		}
	}
}

func TestSmokeLokiPush(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	now := time.Now()
	line := "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus. id=" + strconv.FormatInt(now.UnixNano(), 10)
	t0 := time.Now()
	if err := pushLoki(env.LokiURL(), `{node="n1", source="kernel"}`, line, now); err != nil {
		t.Fatal(err)
	}
	s := waitForLine(t, env.LokiURL(), `{node="n1", source="kernel"} |= "Xid"`, line, now, 20*time.Second)
	t.Logf("pushed and read back in %s", time.Since(t0).Round(time.Millisecond))
	hasLabels(t, s.Labels, map[string]string{"node": "n1", "source": "kernel"})
	t.Logf("stream labels: %v", s.Labels)
}

// otlpLogs builds an OTLP logs request with one record per (resource attributes, body).
func otlpLogs(now time.Time, recs ...map[string]string) []byte {
	ld := plog.NewLogs()
	for _, attrs := range recs {
		rl := ld.ResourceLogs().AppendEmpty()
		for k, v := range attrs {
			if k != "body" {
				rl.Resource().Attributes().PutStr(k, v)
			}
		}
		lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(now))
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
		lr.SetSeverityNumber(plog.SeverityNumberError)
		lr.SetSeverityText("ERROR")
		lr.Body().SetStr(attrs["body"])
		lr.Attributes().PutStr("source", "kernel")
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

func TestSmokeCollectorToLoki(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Collector: true})
	now := time.Now()
	id := strconv.FormatInt(now.UnixNano(), 10)
	line1 := "NVRM: Xid (PCI:0000:3b:00): 48, DBE id=" + id
	line2 := "mlx5_core 0000:5e:00.0: Port: 1 Link DOWN id=" + id
	body := otlpLogs(now,
		map[string]string{"k8s.node.name": "n1", "service.name": "dmesg-exporter", "body": line1},
		map[string]string{"node": "n2", "service.name": "dmesg-exporter", "body": line2},
	)
	resp, err := http.Post(env.OTLPEndpoint()+"/v1/logs", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP export: %s: %s", resp.Status, rb)
	}
	s := waitForLine(t, env.LokiURL(), `{k8s_node_name="n1"}`, line1, now, 30*time.Second)
	hasLabels(t, s.Labels, map[string]string{"k8s_node_name": "n1", "service_name": "dmesg-exporter"})
	t.Logf("k8s.node.name stream labels: %v", s.Labels)
	s = waitForLine(t, env.LokiURL(), `{node="n2"}`, line2, now, 30*time.Second)
	hasLabels(t, s.Labels, map[string]string{"node": "n2"})
}

func TestFaultInjectionLokiRestart(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	loki := env.LokiURL()
	now := time.Now()
	before := "before restart " + strconv.FormatInt(now.UnixNano(), 10)
	if err := pushLoki(loki, `{node="n1", source="kernel"}`, before, now); err != nil {
		t.Fatal(err)
	}
	waitForLine(t, loki, `{node="n1"}`, before, now, 20*time.Second)

	env.StopLoki(t)
	if err := pushLoki(loki, `{node="n1", source="kernel"}`, "while stopped", time.Now()); err == nil {
		t.Fatal("push to a stopped Loki succeeded")
	} else {
		t.Logf("push while stopped failed as expected: %v", err)
	}

	env.StartLoki(t)
	if env.LokiURL() != loki {
		t.Fatalf("Loki moved from %s to %s", loki, env.LokiURL())
	}
	waitForLine(t, loki, `{node="n1"}`, before, now, 20*time.Second)
	after := "after restart " + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := pushLoki(loki, `{node="n1", source="kernel"}`, after, time.Now()); err != nil {
		t.Fatalf("push after restart: %v", err)
	}
	waitForLine(t, loki, `{node="n1"}`, after, now, 20*time.Second)
}

func TestFaultInjectionAPIServerRestart(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	ctx := ctxT(t, 2*time.Minute)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "checkpoint", Namespace: "default"}, Data: map[string]string{"pos": "42"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	env.StopAPIServer(t)
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := cs.CoreV1().ConfigMaps("default").Get(short, "checkpoint", metav1.GetOptions{})
	cancel()
	if err == nil {
		t.Fatal("get from a stopped apiserver succeeded")
	}
	t.Logf("get while stopped failed as expected: %v", err)

	env.StartAPIServer(t)
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "checkpoint", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if got.Data["pos"] != "42" {
		t.Fatalf("configmap after restart: %v", got.Data)
	}
	cm2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: "default"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm2, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after restart: %v", err)
	}
}

func TestSmokePrometheusScrape(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Prometheus: &testenv.PrometheusOptions{}})

	// The thing to scrape starts after Prometheus, as in most tests.
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_testenv_smoke_total", Help: "smoke"})
	reg.MustRegister(c)
	c.Add(3)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	env.AddScrapeTarget(t, testenv.ScrapeTarget{Job: "smoke", Address: ln.Addr().String()})
	eventually.NoError(t, 20*time.Second, "the metric scraped", func() error {
		v, err := promQuery(env.PrometheusURL(), `faultline_testenv_smoke_total{job="smoke"}`)
		if err == nil && v != "3" {
			err = fmt.Errorf("value %q, want 3", v)
		}
		return err
	})
}

// promQuery runs an instant query and returns the value of its first sample.
func promQuery(base, query string) (string, error) {
	resp, err := http.Get(base + "/api/v1/query?" + url.Values{"query": {query}}.Encode())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", err
	}
	if len(r.Data.Result) == 0 {
		return "", fmt.Errorf("no samples (status %s)", r.Status)
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return s, nil
}

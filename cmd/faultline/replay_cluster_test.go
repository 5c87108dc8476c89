package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/replay"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// applyChartController renders the chart (release faultline in namespace ns, with
// helm's --set-file files and --set values) and
// creates its controller Deployments and its packs' ConfigMaps: the objects replay
// --from-cluster reads, as helm installs them (no controller-manager runs: objects
// only).
func applyChartController(t *testing.T, cs kubernetes.Interface, ns string, files map[string]string, sets ...string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "faultline", filepath.Join(root, "helm", "faultline"), "--namespace", ns}
	for k, f := range files {
		args = append(args, "--set-file", k+"="+f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(testenv.Binary(t, "helm"), args...)
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+tmp, "HELM_CACHE_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, stderr.String())
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	deployments := 0
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch {
		case u.GetKind() == "Deployment" && strings.HasPrefix(u.GetName(), "faultline-controller"):
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &d, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			deployments++
		case u.GetKind() == "ConfigMap" && strings.Contains(u.GetName(), "packs"):
			var cm corev1.ConfigMap
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deployments == 0 {
		t.Fatal("the render has no controller Deployment")
	}
}

// TestReplayFromCluster replays with the configuration of controllers installed by
// the chart: their Deployments' flags and the packs of their ConfigMaps, over a
// month of lines in a real Loki, against a real API server.
func TestReplayFromCluster(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kubernetes: true, Loki: true})
	ctx := context.Background()
	cs := e.Clientset()
	for i := range 20 {
		// Two shards for the sharded release: a (the default) and b, which has gpu-05.
		shard := "a"
		if i >= 10 || i == 5 {
			shard = "b"
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%02d", i),
			Labels: map[string]string{"nvidia.com/gpu.present": "true", "example.com/shard": shard}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	end := time.Now().Truncate(time.Hour)
	seedMonth(t, e.LokiURL(), end)
	userPack := map[string]string{"packs.user.link\\.yaml": filepath.Join(writePack(t, 3, "manual"), "pack.yaml")}
	// The chart's controller: the default packs in their ConfigMaps (so
	// --no-default-packs), the user pack in faultline-packs, a budget of 5%.
	chart := []string{"loki.url=" + e.LokiURL(), "controller.budgetPercent=5"}
	applyChartController(t, cs, "faultline", userPack, chart...)
	applyChartController(t, cs, "fl-sharded", userPack, append(chart, "controller.budgetPercent=50", "controller.shardLabel=example.com/shard",
		"controller.shards[0].name=a", "controller.shards[0].value=a", "controller.shards[1].name=b", "controller.shards[1].value=b")...)
	kubeconfig := identityKubeconfig(t, e, "replay-cluster", []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}})
	window := []string{"--kubeconfig", kubeconfig, "--since", "721h", "--until", end.Add(time.Hour).Format(time.RFC3339), "--step", "24h"}

	replayJSON := func(t *testing.T, args ...string) replayOutput {
		t.Helper()
		out, err := run(t, "", append(append([]string{"replay"}, window...), append(args, "-o", "json")...)...)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		var rep replayOutput
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("replay JSON: %v\n%s", err, out)
		}
		return rep
	}
	taken := func(cc *clusterConfig, flag string) string {
		for _, f := range cc.Taken {
			if f.Flag == flag {
				return f.Value
			}
		}
		return "(not taken)"
	}

	t.Run("the controller's budget and packs", func(t *testing.T) {
		rep := replayJSON(t, "--from-cluster")
		cc := rep.Config
		if cc == nil || cc.Deployment != "faultline/faultline-controller" || cc.Generation != 1 || cc.Image == "" {
			t.Fatalf("config %+v", cc)
		}
		if got := taken(cc, "--budget-percent"); got != "5" {
			t.Errorf("--budget-percent taken %q, want 5", got)
		}
		// The packs are loaded with the controller's taint allowance.
		if got := taken(cc, "--allow-taint-effects"); got != "[NoSchedule,PreferNoSchedule]" {
			t.Errorf("--allow-taint-effects taken %q, want the chart's", got)
		}
		if got := taken(cc, "--loki-url"); got != e.LokiURL() {
			t.Errorf("--loki-url taken %q, want the Deployment's %q", got, e.LokiURL())
		}
		if cc.DefaultPacks || len(cc.Packs) != 2 || cc.Packs[0].Path != "/etc/faultline/packs/defaults" || cc.Packs[1].Path != "/etc/faultline/packs/user" {
			t.Fatalf("packs %+v, want the chart's defaults then user, without the built-in ones", cc.Packs)
		}
		if o := cc.Packs[1].Objects; len(o) != 1 || o[0].Kind != "ConfigMap" || o[0].Name != "faultline-packs" || o[0].ResourceVersion == "" {
			t.Errorf("user packs from %+v, want ConfigMap faultline-packs at a resourceVersion", o)
		}
		if len(cc.Packs[0].Objects) < 5 {
			t.Errorf("default packs from %+v, want the chart's ConfigMap per pack", cc.Packs[0].Objects)
		}
		if !slices.Contains(cc.NotReplayed, "--act-workers") {
			t.Errorf("not replayed %v, want --act-workers among them", cc.NotReplayed)
		}
		// 5% of 20 nodes: one taint (gpu-05's burst comes first), the other two held;
		// the default 10% would taint two.
		if got := rep.Baseline.Result.Nodes(replay.OutcomeTaint); !slices.Equal(got, []string{"gpu-05"}) {
			t.Errorf("tainted %v, want gpu-05 alone (the Deployment's 5%% budget)", got)
		}
		if got := rep.Baseline.Result.Nodes(replay.HoldOutcome("budget")); !slices.Equal(got, []string{"gpu-00", "gpu-01"}) {
			t.Errorf("held for the budget %v, want gpu-00 and gpu-01", got)
		}
		if replay.Changed(rep.Diff) || rep.Candidate.Packs != rep.Baseline.Packs {
			t.Errorf("no --packs, yet the sets differ: %q vs %q, %+v", rep.Candidate.Packs, rep.Baseline.Packs, rep.Diff)
		}
	})

	t.Run("the command line overrides, its packs come after the controller's", func(t *testing.T) {
		rep := replayJSON(t, "--from-cluster=faultline/faultline-controller", "--budget-percent", "50", "--packs", writePack(t, 2, "manual"))
		if o := rep.Config.Overridden; len(o) != 1 || o[0] != (flagOverride{Flag: "--budget-percent", Deployment: "5", Value: "50"}) {
			t.Errorf("overridden %+v, want --budget-percent 5 → 50", o)
		}
		if got := rep.Baseline.Result.Nodes(replay.OutcomeTaint); !slices.Equal(got, []string{"gpu-00", "gpu-01", "gpu-05"}) {
			t.Errorf("baseline tainted %v, want the three nodes of three link-downs", got)
		}
		if got := rep.Candidate.Result.Nodes(replay.OutcomeTaint); len(got) != 6 {
			t.Errorf("candidate tainted %v, want six nodes (two link-downs are enough)", got)
		}
		if !strings.HasPrefix(rep.Candidate.Packs, "/etc/faultline/packs/defaults+/etc/faultline/packs/user+") {
			t.Errorf("candidate packs %q, want the controller's then --packs", rep.Candidate.Packs)
		}
	})

	t.Run("table: the configuration on standard error", func(t *testing.T) {
		out, err := run(t, "", append([]string{"replay", "--from-cluster", "--budget-percent", "10"}, window...)...)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		t.Logf("\n%s", out)
		for _, want := range []string{
			`configuration of Deployment faultline/faultline-controller \(generation 1, container controller, image \S+\)\n`,
			`\n--budget-percent +10 +command line \(deployment: 5\)\n`,
			`\n--loki-url +` + regexp.QuoteMeta(e.LokiURL()) + ` +deployment\n`,
			`\npacks: no built-in packs \(--no-default-packs\); 2 --packs:\n`,
			`\n  /etc/faultline/packs/user: volume user-packs at /etc/faultline/packs/user: ConfigMap faultline-packs \(resourceVersion \d+\)\n`,
			`\nnote: --loki-url is the controller's \(an in-cluster address\)`,
			`\nSET +PACKS`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("output lacks %s", want)
			}
		}
	})

	t.Run("a shard's Deployment", func(t *testing.T) {
		out, err := run(t, "", append([]string{"replay", "--from-cluster=fl-sharded/faultline-controller"}, window...)...)
		if err == nil || !strings.Contains(err.Error(), "the controller Deployments in fl-sharded: faultline-controller-a (shard a), faultline-controller-b (shard b)") {
			t.Fatalf("err %v, want the shards' Deployments listed\n%s", err, out)
		}
		rep := replayJSON(t, "--from-cluster=fl-sharded/faultline-controller-a")
		if got := taken(rep.Config, "--shard-default-except"); got != "[b]" {
			t.Errorf("--shard-default-except taken %q", got)
		}
		// Shard a: every node not labelled b (gpu-05 is b's); 50% of its 9 nodes.
		if rep.Fleet.Nodes != 9 || rep.Fleet.Shard == "" || rep.Baseline.Result.OtherShard == 0 {
			t.Errorf("fleet %+v, other shard's lines %d: want shard a's 9 nodes and b's lines skipped", rep.Fleet, rep.Baseline.Result.OtherShard)
		}
		if got := rep.Baseline.Result.Nodes(replay.OutcomeTaint); !slices.Equal(got, []string{"gpu-00", "gpu-01"}) {
			t.Errorf("shard a tainted %v, want gpu-00 and gpu-01", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		odd := func(name string, c corev1.Container, vols ...corev1.Volume) {
			labels := map[string]string{"app": name}
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols}}}}
			if _, err := cs.AppsV1().Deployments("faultline").Create(ctx, d, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		odd("no-controller", corev1.Container{Name: "main", Image: "x"})
		odd("not-faultline", corev1.Container{Name: "controller", Image: "x", Args: []string{"serve"}})
		odd("image-packs", corev1.Container{Name: "controller", Image: "x", Args: []string{"controller", "--packs=/opt/packs"}})
		odd("missing-configmap", corev1.Container{Name: "controller", Image: "x", Args: []string{"controller", "--packs=/etc/packs/site"},
			VolumeMounts: []corev1.VolumeMount{{Name: "p", MountPath: "/etc/packs"}}},
			corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}})
		odd("empty-dir", corev1.Container{Name: "controller", Image: "x", Args: []string{"controller", "--packs", "/packs"},
			VolumeMounts: []corev1.VolumeMount{{Name: "p", MountPath: "/packs"}}},
			corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		for _, tc := range []struct {
			kubeconfig, deployment, want string
		}{
			{readOnlyKubeconfig(t, e), "faultline/faultline-controller", "get Deployment faultline/faultline-controller: forbidden: --from-cluster needs get on it"},
			{kubeconfig, "faultline/nothing", "Deployment faultline/nothing not found; the controller Deployments in faultline: faultline-controller: name one"},
			{kubeconfig, "faultline/no-controller", `Deployment faultline/no-controller has no container "controller" (its containers: main)`},
			{kubeconfig, "faultline/not-faultline", "does not run `faultline controller`"},
			{kubeconfig, "faultline/image-packs", `--packs /opt/packs: no volume of container "controller" is mounted at or above it`},
			{kubeconfig, "faultline/missing-configmap", "--packs /etc/packs/site: ConfigMap faultline/gone not found"},
			{kubeconfig, "faultline/empty-dir", `volume "p" is neither a ConfigMap, a Secret nor a projected volume`},
		} {
			out, err := run(t, "", append([]string{"replay", "--from-cluster=" + tc.deployment}, append(window[2:], "--kubeconfig", tc.kubeconfig)...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err %v, want %q\n%s", tc.deployment, err, tc.want, out)
			}
		}
	})
}

// identityKubeconfig writes a kubeconfig of ServiceAccount faultline/name that may
// read Nodes and what rules grant, cluster-wide.
func identityKubeconfig(t *testing.T, e *testenv.Env, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	rbac := e.Clientset().RbacV1()
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}})
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "faultline"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := e.ServiceAccountToken(t, "faultline", name)
	rc := e.RESTConfigForToken(token)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC is cached by the authorizer: wait until the binding is in force.
	eventually.NoError(t, 30*time.Second, "the identity reads configmaps", func() error {
		_, err := cs.CoreV1().ConfigMaps("faultline").Get(ctx, "faultline-packs", metav1.GetOptions{})
		return err
	})
	return writeKubeconfig(t, rc.Host, rc.CAData, name, token)
}

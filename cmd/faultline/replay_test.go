package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/faultline-dev/faultline/controller/replay"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// replayPack is a pack with one link-down rule that taints at count link-downs of a
// node within 10 minutes, with a recovery policy.
const replayPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata:
  name: replay-test
spec:
  defaults:
    source: kernel
    severity: critical
    action: taint
    taint: {key: faultline.io/faulty, effect: NoSchedule}
    recover: %s
  rules:
    - id: link-down
      description: Repeated link-downs of a port
      match:
        regex: 'mlx5_core \S+ (?P<dev>\S+): Link down'
      threshold: {count: %d, window: 10m}
`

func writePack(t *testing.T, count int, recover string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pack.yaml"), fmt.Appendf(nil, replayPack, recover, count), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// seedMonth pushes a month of kernel lines of 20 GPU nodes into Loki, each stream in
// time order, and returns the nodes that had bursts of three link-downs within 10
// minutes and those that had two. gpu-05 has two bursts of three, 20 days apart.
func seedMonth(t *testing.T, lokiURL string, end time.Time) (three, two []string) {
	t.Helper()
	start := end.Add(-30 * 24 * time.Hour)
	three = []string{"gpu-00", "gpu-01", "gpu-05"}
	two = []string{"gpu-02", "gpu-03", "gpu-04"}
	burstDays := map[string][]int{"gpu-00": {4}, "gpu-01": {19}, "gpu-02": {9}, "gpu-03": {14}, "gpu-04": {27}, "gpu-05": {2, 22}}
	var streams []push.Stream
	for i := range 20 {
		node := fmt.Sprintf("gpu-%02d", i)
		var es []push.Entry
		add := func(at time.Time, text string) {
			es = append(es, push.Entry{Timestamp: at, Line: text})
		}
		for day := range 30 {
			d := start.Add(time.Duration(day)*24*time.Hour + time.Duration(i)*time.Minute)
			add(d.Add(time.Hour), "systemd[1]: Started Daily apt download activities.")
			if day%3 == i%3 { // a lone link-down now and then: no rule fires on it
				add(d.Add(2*time.Hour), "mlx5_core 0000:0c:00.0 ibp12s0: Link down")
			}
			n := 0
			switch {
			case slices.Contains(three, node) && slices.Contains(burstDays[node], day):
				n = 3
			case slices.Contains(two, node) && slices.Contains(burstDays[node], day):
				n = 2
			}
			for k := range n {
				add(d.Add(5*time.Hour+time.Duration(k)*2*time.Minute), "mlx5_core 0000:0c:00.0 ibp12s0: Link down")
			}
		}
		slices.SortFunc(es, func(a, b push.Entry) int { return a.Timestamp.Compare(b.Timestamp) })
		streams = append(streams, push.Stream{Labels: fmt.Sprintf(`{%s=%q, %s=%q}`, logstream.LabelNode, node, logstream.LabelSource, logstream.SourceKernel), Entries: es})
	}
	if err := testenv.PushLoki(lokiURL, streams); err != nil {
		t.Fatal(err)
	}
	return three, two
}

// readOnlyKubeconfig writes a kubeconfig of a ServiceAccount that may only get, list
// and watch Nodes, and checks that it may not write one.
func readOnlyKubeconfig(t *testing.T, e *testenv.Env) string {
	t.Helper()
	ctx := context.Background()
	cs := e.Clientset()
	rbac := cs.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "replay-read"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "replay-read"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "replay-read"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "replay", Namespace: "faultline"}}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token := e.ServiceAccountToken(t, "faultline", "replay")
	rc := e.RESTConfigForToken(token)
	ro, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC is cached by the authorizer: wait until the binding is in force.
	eventually.NoError(t, 30*time.Second, "the read-only identity lists nodes", func() error {
		_, err := ro.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	n, err := ro.CoreV1().Nodes().Get(ctx, "gpu-00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["written"] = "yes"
	if _, err := ro.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the read-only identity updated a node (err %v): not read-only", err)
	}
	return writeKubeconfig(t, rc.Host, rc.CAData, "replay", token)
}

// writeKubeconfig writes a kubeconfig of user's token for the API server at host.
func writeKubeconfig(t *testing.T, host string, ca []byte, user, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: user}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplayOverAMonthOfLoki seeds a real Loki with a month of kernel lines and
// replays packs over it against a real API server, as an identity that may only read
// Nodes.
func TestReplayOverAMonthOfLoki(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kubernetes: true, Loki: true})
	ctx := context.Background()
	for i := range 20 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%02d", i),
			Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
		if _, err := e.Clientset().CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	end := time.Now().Truncate(time.Hour)
	three, two := seedMonth(t, e.LokiURL(), end)
	kubeconfig := readOnlyKubeconfig(t, e)
	base, lowered := writePack(t, 3, "manual"), writePack(t, 2, "manual")

	// replayJSONOf runs replay with the built-in packs in both sets or in neither.
	replayJSONOf := func(t *testing.T, builtIn bool, extra ...string) replay.Report {
		t.Helper()
		args := append([]string{"replay", "--loki-url", e.LokiURL(), "--kubeconfig", kubeconfig,
			"--since", "721h", "--until", end.Add(time.Hour).Format(time.RFC3339), "--step", "24h", "--format", "json"}, extra...)
		if !builtIn {
			args = append(args, "--no-default-packs")
		}
		out, err := run(t, "", args...)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		var rep replay.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("replay JSON: %v\n%s", err, out)
		}
		return rep
	}
	replayJSON := func(t *testing.T, extra ...string) replay.Report { t.Helper(); return replayJSONOf(t, false, extra...) }

	t.Run("lowered threshold shows the extra nodes", func(t *testing.T) {
		rep := replayJSON(t, "--packs", lowered, "--baseline", base, "--budget-percent", "50")
		if rep.Fleet.Eligible != 20 {
			t.Fatalf("fleet %+v, want 20 eligible nodes", rep.Fleet)
		}
		if got := rep.Baseline.Result.Nodes(replay.OutcomeTaint); !slices.Equal(got, three) {
			t.Errorf("baseline tainted %v, want %v", got, three)
		}
		want := slices.Sorted(slices.Values(append(slices.Clone(three), two...)))
		if got := rep.Candidate.Result.Nodes(replay.OutcomeTaint); !slices.Equal(got, want) {
			t.Errorf("candidate tainted %v, want %v", got, want)
		}
		var only, both []string
		for _, r := range rep.Diff {
			if r.Rule != "replay-test/link-down" || r.Outcome != replay.OutcomeTaint {
				t.Errorf("unexpected row %+v", r)
			}
			switch r.In {
			case replay.OnlyCandidate:
				only = append(only, r.Node)
			case replay.Both:
				both = append(both, r.Node)
			default:
				t.Errorf("row only in the baseline: %+v", r)
			}
		}
		if !slices.Equal(only, two) || !slices.Equal(both, three) {
			t.Errorf("diff: only in candidate %v (want %v), both %v (want %v)", only, two, both, three)
		}
		// The day of the burst is when the taint comes.
		for _, r := range rep.Diff {
			if r.Node == "gpu-02" && !r.Candidate.First.After(end.Add(-30*24*time.Hour).Add(9*24*time.Hour)) {
				t.Errorf("gpu-02 tainted at %s, before its burst on day 9", r.Candidate.First)
			}
		}
	})

	t.Run("same packs give no diff", func(t *testing.T) {
		rep := replayJSON(t, "--packs", base, "--baseline", base, "--budget-percent", "50")
		if replay.Changed(rep.Diff) {
			t.Errorf("same packs, a diff: %+v", rep.Diff)
		}
		if len(rep.Diff) != len(three) {
			t.Errorf("%d rows, want %d (the nodes both taint)", len(rep.Diff), len(three))
		}
	})

	t.Run("built-in packs too", func(t *testing.T) {
		// Each set is the built-in packs and then its directory, as the controller
		// loads them: four queries (kernel, pod, nvml, probe), the same decisions.
		rep := replayJSONOf(t, true, "--packs", lowered, "--baseline", base, "--budget-percent", "50")
		if q := rep.Candidate.Result.Queries; len(q) != 4 {
			t.Errorf("queries %v, want kernel, nvml, pod and probe", q)
		}
		if rep.Candidate.Packs != "built-in+"+lowered {
			t.Errorf("candidate packs %q", rep.Candidate.Packs)
		}
		var only []string
		for _, r := range rep.Diff {
			if r.In != replay.Both {
				only = append(only, string(r.In)+":"+r.Node+":"+r.Rule)
			}
		}
		want := []string{"candidate:gpu-02:replay-test/link-down", "candidate:gpu-03:replay-test/link-down", "candidate:gpu-04:replay-test/link-down"}
		if !slices.Equal(only, want) {
			t.Errorf("one-sided rows %v, want %v", only, want)
		}
	})

	t.Run("the budget holds what it would have held", func(t *testing.T) {
		// 10% of 20 nodes: two taints (the first two bursts, gpu-05 and gpu-00), and
		// the candidate's four more are held (taints are manual: none is lifted).
		rep := replayJSON(t, "--packs", lowered, "--baseline", base)
		if got := rep.Candidate.Result.Nodes(replay.OutcomeTaint); !slices.Equal(got, []string{"gpu-00", "gpu-05"}) {
			t.Errorf("candidate tainted %v, want gpu-00 and gpu-05 (the budget)", got)
		}
		if got := rep.Candidate.Result.Nodes(replay.HoldOutcome("budget")); !slices.Equal(got, []string{"gpu-01", "gpu-02", "gpu-03", "gpu-04"}) {
			t.Errorf("candidate held %v for the budget, want gpu-01 to gpu-04", got)
		}
		if rep.Candidate.Result.StillHeld != 4 {
			t.Errorf("%d faults still held at the end, want 4", rep.Candidate.Result.StillHeld)
		}
	})

	t.Run("recovery lifts a taint, a later burst taints again", func(t *testing.T) {
		after := writePack(t, 3, "{after: 24h}")
		rep := replayJSON(t, "--packs", after, "--baseline", base)
		find := func(res *replay.Result, node string) replay.Action {
			for _, a := range res.Actions {
				if a.Node == node && a.Outcome == replay.OutcomeTaint {
					return a
				}
			}
			t.Fatalf("no taint of %s in %+v", node, res.Actions)
			return replay.Action{}
		}
		// Manual: the second burst finds the node tainted still.
		if a := find(rep.Baseline.Result, "gpu-05"); a.Recovered != 0 || a.Count != 2 {
			t.Errorf("manual recovery: %+v, want 2 decisions and no recovery", a)
		}
		// After 24h: lifted a day after the first burst, tainted again at the second.
		a := find(rep.Candidate.Result, "gpu-05")
		if a.Recovered != 2 || a.Count != 2 || a.Last.Sub(a.First) < 19*24*time.Hour {
			t.Errorf("recover after 24h: %+v, want 2 taints 20 days apart, each lifted", a)
		}
	})

	t.Run("Loki unreachable is an error", func(t *testing.T) {
		out, err := run(t, "", "replay", "--loki-url", "http://127.0.0.1:1", "--kubeconfig", kubeconfig, "--no-default-packs",
			"--since", "48h", "--packs", base, "--baseline", base)
		if err == nil || !strings.Contains(err.Error(), "candidate packs: replay: lokisource: query kernel:") {
			t.Fatalf("err %v, want the candidate's kernel query failing\n%s", err, out)
		}
	})

	t.Run("table", func(t *testing.T) {
		// Relative directories, as an operator names them (and docs/replay.md shows).
		dir := t.TempDir()
		for name, count := range map[string]int{"current": 3, "candidate": 2} {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name, "pack.yaml"), fmt.Appendf(nil, replayPack, "manual", count), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Chdir(dir)
		out, err := run(t, "", "replay", "--loki-url", e.LokiURL(), "--kubeconfig", kubeconfig, "--no-default-packs",
			"--since", "721h", "--until", end.Add(time.Hour).Format(time.RFC3339), "--step", "24h",
			"--packs", "candidate", "--baseline", "current", "--budget-percent", "50")
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		t.Logf("\n%s", out)
		for _, want := range []string{"IN ", "candidate  gpu-02", "both       gpu-00", "replay-test/link-down"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q:\n%s", want, out)
			}
		}
	})
}

func TestReplayRefusesBadInput(t *testing.T) {
	pack := writePack(t, 3, "manual")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--loki-url", "http://127.0.0.1:1"}, "--packs is required"},
		{[]string{"--packs", pack}, "--loki-url is required"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--format", "xml"}, "--format must be table or json"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--since", "2200h"}, "--since must be between"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--until", "yesterday"}, "--until: want an RFC 3339 time"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--max-step-lines", "0"}, "--max-step-lines (0) must be positive"},
		{[]string{"--packs", t.TempDir(), "--loki-url", "http://127.0.0.1:1", "--no-default-packs", "--baseline", pack}, "candidate packs: no enabled rules in "},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--no-default-packs"}, "baseline packs: --no-default-packs leaves this set empty"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--fleet-min-nodes", "1"}, "--fleet-min-nodes 1: must be at least 2"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--fleet-min-share", "1.5"}, "--fleet-min-share 1.5: must be in (0, 1]"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--fleet-window", "-1m"}, "--fleet-window -1m0s: must be positive"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--fleet-group-budget", "0.5"}, "--fleet-group-budget 0.5: must be 0"},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--fleet-label", "rack name"}, `--fleet-label "rack name": not a label key`},
		{[]string{"--from-cluster", "faultline/faultline-controller-a"}, "--from-cluster takes its Deployment after an equals sign: --from-cluster=faultline/faultline-controller-a"},
		{[]string{"--from-cluster", "--baseline", pack}, "--baseline and --from-cluster"},
		{[]string{"--from-cluster=a/b/c"}, `--from-cluster "a/b/c": want NAMESPACE/DEPLOYMENT`},
		{[]string{"--packs", pack, "--loki-url", "http://127.0.0.1:1", "--max-mode", "strict"}, "--max-mode: "},
	} {
		out, err := run(t, "", append([]string{"replay"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("replay %v: err %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

func TestReplayProgressOnlyOnATerminal(t *testing.T) {
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(40 * time.Hour)
	var buf strings.Builder
	if p := newProgress(&buf, from, to); p.step("candidate") != nil {
		t.Fatal("a progress bar on a writer that is no terminal")
	}
	p := &progress{w: &buf, on: true, from: from, to: to}
	p.step("baseline")(from.Add(10 * time.Hour))
	p.done()
	want := "\rbaseline  [" + strings.Repeat("=", 10) + strings.Repeat(" ", 30) + "]  25% 2026-10-01 10:00\n"
	if buf.String() != want {
		t.Errorf("progress %q, want %q", buf.String(), want)
	}
}

// Package dashboards_test executes every query of the Grafana dashboards in
// helm/faultline/dashboards: LogQL against a real Loki filled by the real exporter
// (kernel lines, and the controller's own log as a pod log), PromQL against a real
// Prometheus scraping the real controller, exporter and probe agent.
package dashboards_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentrbac "github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/dmesg-exporter/kmsg"
	"github.com/faultline-dev/faultline/test/testenv"
)

type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource struct {
		Type string `json:"type"`
	} `json:"datasource"`
	Targets []struct {
		RefID     string `json:"refId"`
		Expr      string `json:"expr"`
		QueryType string `json:"queryType"`
		Instant   bool   `json:"instant"`
	} `json:"targets"`
}

// start runs a faultline component; its output goes to w (or the test log dir).
func start(t *testing.T, w io.Writer, env []string, bin string, args ...string) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// criWriter writes what a container prints as the kubelet does: CRI log lines.
func criWriter(t *testing.T, path string) io.Writer {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(f, "%s stderr F %s\n", time.Now().UTC().Format(time.RFC3339Nano), sc.Text())
		}
	}()
	t.Cleanup(func() { pw.Close(); f.Close() })
	return pw
}

func getJSON(t *testing.T, u string, out any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestDashboardQueries(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true, Collector: true, Prometheus: &testenv.PrometheusOptions{}})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cs := env.Clientset()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faultline"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller calls the agent with a ServiceAccount token that holds the runner role.
	token := env.ServiceAccountToken(t, "faultline", "faultline-controller")
	_, runner, err := agentrbac.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, runner, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: runner.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: runner.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "faultline", Name: "faultline-controller"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	// The CUDA programs' stand-in, with recorded outputs: GPU 3 slow on pciebw.
	fakes := filepath.Join(dir, "fakes")
	build := exec.Command("go", "build", "-o", filepath.Join(fakes, "fake"), "./active-probes/probe/testdata/fake")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the fake programs: %v\n%s", err, out)
	}
	for _, p := range []string{"pciebw", "dgemm"} {
		if err := os.Symlink(filepath.Join(fakes, "fake"), filepath.Join(fakes, p)); err != nil {
			t.Fatal(err)
		}
	}
	recorded := filepath.Join(root, "active-probes", "probe", "testdata", "recorded")
	bin := testenv.BuildFaultline(t)
	logs := filepath.Join(dir, "logs")
	_ = os.MkdirAll(logs, 0o755)
	logFile := func(name string) io.Writer {
		f, err := os.Create(filepath.Join(logs, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	ports := testenv.FreePorts(t, 3)
	agentPort, exporterPort, controllerPort := ports[0], ports[1], ports[2]
	start(t, logFile("agent.log"), []string{
		"FAULTLINE_FAKE_OUTPUT_PCIEBW=" + filepath.Join(recorded, "pciebw", "dgxa100-gpu3-slow-gpu5-x8.jsonl"),
		"FAULTLINE_FAKE_OUTPUT_DGEMM=" + filepath.Join(recorded, "dgemm", "dgxa100-pass.jsonl"),
	}, bin, "probe-agent", "--node", "gpu-1", "--listen", fmt.Sprintf("127.0.0.1:%d", agentPort), "--kubeconfig", env.Kubeconfig(),
		"--command", "pciebw="+filepath.Join(fakes, "pciebw"), "--command", "dgemm="+filepath.Join(fakes, "dgemm"),
		"--command", "ping="+testenv.Binary(t, "ping"))

	// The node's kernel log: the faults the Faults dashboard shows.
	boot, err := kmsg.BootTime()
	if err != nil {
		t.Fatal(err)
	}
	kmsgPath := filepath.Join(dir, "kmsg")
	lines := []string{
		"NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"NVRM: Xid (PCI:0000:07:00): 48, pid=2211, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
		"NVRM: Xid (PCI:0000:0f:00): 13, pid=48213, name=python3, Graphics Exception: ESR 0x504648=0x11f000e",
		"NVRM: Xid (PCI:0000:0f:00): 13, pid=48213, name=python3, Graphics Exception: ESR 0x504648=0x11f000e",
		"nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028, Non-fatal, Link 30 egress non-posted PRIV error (First)",
		"pcieport 0000:80:03.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:81:00.0",
		"pcieport 0000:00:1c.0: AER: Corrected error received: 0000:00:1c.0",
		"mlx5_core 0000:18:00.0 ens1np0: Link up",
		"mlx5_core 0000:18:00.0 ens1np0: Link down",
		"mlx5_core 0000:18:00.0 ens1np0: Link up",
		"mlx5_core 0000:18:00.0 ens1np0: Link down",
		"ice 0000:17:00.0 eth2: NIC Link is Down",
	}
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "3,%d,%d,-;%s\n", i+1, time.Since(boot).Microseconds()-int64(len(lines)-i)*1000, l)
	}
	if err := os.WriteFile(kmsgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("8e1f4c3a-0000-4000-8000-000000000001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The controller's log, as its pod's log file on the node.
	pods := filepath.Join(dir, "pods")
	controllerLog := criWriter(t, filepath.Join(pods, "faultline_faultline-controller-0_6a7c1f0e-0000-4000-8000-000000000001", "controller", "0.log"))
	start(t, logFile("exporter.log"), nil, bin, "dmesg-exporter", "--node", "gpu-1", "--kmsg-path", kmsgPath, "--boot-id-path", bootID,
		"--state-file", filepath.Join(dir, "state.json"), "--otlp-endpoint", env.OTLPEndpoint(), "--pod-logs", pods,
		"--listen", fmt.Sprintf("127.0.0.1:%d", exporterPort), "--batch-wait", "200ms")
	api := fmt.Sprintf("http://127.0.0.1:%d", controllerPort)
	start(t, controllerLog, nil, bin, "controller", "--kubeconfig", env.Kubeconfig(), "--namespace", "faultline", "--identity", "faultline-controller-0",
		"--loki-url", env.LokiURL(), "--listen", fmt.Sprintf("127.0.0.1:%d", controllerPort), "--initial-lookback", "1h",
		"--budget-percent", "100", "--reconcile-interval", "1s",
		"--probe-agent", fmt.Sprintf("gpu-1=http://127.0.0.1:%d", agentPort), "--probe-token-file", tokenFile)
	env.AddScrapeTarget(t,
		testenv.ScrapeTarget{Job: "faultline-controller", Address: fmt.Sprintf("127.0.0.1:%d", controllerPort)},
		testenv.ScrapeTarget{Job: "faultline-dmesg-exporter", Address: fmt.Sprintf("127.0.0.1:%d", exporterPort)},
		testenv.ScrapeTarget{Job: "faultline-probe-agent", Address: fmt.Sprintf("127.0.0.1:%d", agentPort)})
	waitFor(t, "the controller to lead", time.Minute, func() bool {
		var f struct {
			Leader bool `json:"leader"`
		}
		return getJSON(t, api+"/api/v1/faults", &f) == nil && f.Leader
	})
	// Probe metrics and probe-result log lines: one run of every check with values.
	body := `{"nodes":["gpu-1"],"checks":["nvml","pciebw","dgemm","ping"],"params":{"ping":{"peer":"127.0.0.1","count":"2"}},"force":true}`
	resp, err := http.Post(api+"/api/v1/probes", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	waitFor(t, "the probe run", time.Minute, func() bool {
		return getJSON(t, api+"/api/v1/probes/"+run.ID, &run) == nil && run.State == "done"
	})
	waitFor(t, "gpu-1 tainted for its Xid 79", time.Minute, func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
		return err == nil && len(n.Spec.Taints) > 0
	})
	// Everything has arrived when the controller's probe results are in Loki and
	// Prometheus has scraped the probe values.
	waitFor(t, "probe results in Loki", 2*time.Minute, func() bool {
		n, _ := logql(t, env.LokiURL(), `{source="pod"} |= "probe result"`, false)
		return n > 0
	})
	waitFor(t, "probe values in Prometheus", time.Minute, func() bool {
		n, _ := promql(t, env.PrometheusURL(), `faultline_probe_value{check="pciebw"}`, true)
		return n > 0
	})
	time.Sleep(3 * time.Second) // a few more scrapes, for rate()

	files, _ := filepath.Glob(filepath.Join(root, "helm", "faultline", "dashboards", "*.json"))
	if len(files) < 2 {
		t.Fatalf("dashboards: %v", files)
	}
	queries := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			panelRows := 0
			for _, tg := range p.Targets {
				expr := substitute(tg.Expr)
				var n int
				var err error
				switch p.Datasource.Type {
				case "loki":
					n, err = logql(t, env.LokiURL(), expr, tg.QueryType == "instant")
				case "prometheus":
					n, err = promql(t, env.PrometheusURL(), expr, tg.Instant)
				default:
					t.Errorf("%s / %s: datasource %q", d.Title, p.Title, p.Datasource.Type)
					continue
				}
				queries++
				if err != nil {
					t.Errorf("%s / %s / %s: %s\n  query: %s", d.Title, p.Title, tg.RefID, err, expr)
					continue
				}
				panelRows += n
			}
			// Every panel shows data here: the stack above produced each kind of it.
			if panelRows == 0 {
				t.Errorf("%s / %s: no data", d.Title, p.Title)
			} else {
				t.Logf("%s / %s: %d series or streams", d.Title, p.Title, panelRows)
			}
		}
	}
	t.Logf("%d queries executed", queries)

	// The Xid panel finds the codes the kernel log has, and no others.
	var xids struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	expr := substitute(`sum by (xid) (count_over_time({source="kernel", node=~"$node"} |= "NVRM: Xid" | regexp "NVRM: Xid \\(PCI:(?P<pci>[^)]+)\\): (?P<xid>\\d+)" [$__range]))`)
	q := url.Values{"query": {expr}, "time": {strconv.FormatInt(time.Now().UnixNano(), 10)}}
	if err := getJSON(t, env.LokiURL()+"/loki/api/v1/query?"+q.Encode(), &xids); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range xids.Data.Result {
		got[r.Metric["xid"]] = fmt.Sprint(r.Value[1])
	}
	if len(got) != 3 || got["79"] != "1" || got["48"] != "1" || got["13"] != "2" {
		t.Errorf("Xid counts %v, want 79:1 48:1 13:2", got)
	}
}

// substitute replaces Grafana's variables with what a dashboard would send.
func substitute(expr string) string {
	r := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h", "${node}", ".+", "$node", ".+")
	return r.Replace(expr)
}

// logql runs a LogQL query and returns the number of streams or series.
func logql(t *testing.T, base, expr string, instant bool) (int, error) {
	now := time.Now()
	q := url.Values{"query": {expr}, "limit": {"100"}}
	path := "/loki/api/v1/query_range"
	if instant {
		path = "/loki/api/v1/query"
		q.Set("time", strconv.FormatInt(now.UnixNano(), 10))
	} else {
		q.Set("start", strconv.FormatInt(now.Add(-time.Hour).UnixNano(), 10))
		q.Set("end", strconv.FormatInt(now.UnixNano(), 10))
		q.Set("step", "15")
	}
	return queryResult(t, base+path+"?"+q.Encode())
}

// promql runs a PromQL query and returns the number of series.
func promql(t *testing.T, base, expr string, instant bool) (int, error) {
	now := time.Now()
	q := url.Values{"query": {expr}}
	path := "/api/v1/query_range"
	if instant {
		path = "/api/v1/query"
		q.Set("time", strconv.FormatInt(now.Unix(), 10))
	} else {
		q.Set("start", strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10))
		q.Set("end", strconv.FormatInt(now.Unix(), 10))
		q.Set("step", "5")
	}
	return queryResult(t, base+path+"?"+q.Encode())
}

func queryResult(t *testing.T, u string) (int, error) {
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(t, u, &r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("status %q", r.Status)
	}
	return len(r.Data.Result), nil
}

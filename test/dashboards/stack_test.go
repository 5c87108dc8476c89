package dashboards_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentrbac "github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/dmesg-exporter/kmsg"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
	"github.com/faultline-dev/faultline/rules/scan"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/packengine"
	"github.com/faultline-dev/faultline/test/testenv"
)

// corpusLine is one line of testdata/corpus (see its README).
type corpusLine struct {
	Label   string `json:"label"`
	XidCode string `json:"xid_code"`
	Message string `json:"message"`
}

func readCorpus(t *testing.T, root string) []corpusLine {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "testdata", "corpus", "kernel-and-pod-lines.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l corpusLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// kline is a kernel log line, with the Xid or SXid code the corpus gives it.
type kline struct{ text, xid, sxid string }

// logData is what the test wrote to the nodes' logs, and so what the panels must find.
type logData struct {
	kernel map[string][]kline // node → kernel lines
	// podFaults: training-pod lines the pod pack acts on; podNoise: NCCL INFO trace
	// lines around them, which are not faults.
	podFaults, podNoise []string
}

func (d logData) texts(node string) []string {
	var out []string
	for _, l := range d.kernel[node] {
		out = append(out, l.text)
	}
	return out
}

// codes counts lines per node and code.
func (d logData) codes(code func(kline) string) map[string]map[string]int {
	m := map[string]map[string]int{}
	for node, ls := range d.kernel {
		for _, l := range ls {
			if c := code(l); c != "" {
				if m[node] == nil {
					m[node] = map[string]int{}
				}
				m[node][c]++
			}
		}
	}
	return m
}

// add appends more's lines.
func (d *logData) add(more logData) {
	if d.kernel == nil {
		d.kernel = map[string][]kline{}
	}
	for n, ls := range more.kernel {
		d.kernel[n] = append(d.kernel[n], ls...)
	}
	d.podFaults = append(d.podFaults, more.podFaults...)
	d.podNoise = append(d.podNoise, more.podNoise...)
}

// buildLogs picks the nodes' log lines: gpu-1 is the sick node (every corpus Xid,
// SXid, fallen-off-the-bus, uncorrectable AER and link-down line); gpu-2 has corrected
// AER lines, link-down lines of many drivers (the network pack's own test lines, those
// that must not count included), and a training pod logging NCCL and CUDA errors. The second
// batch, written once Prometheus has seen the first, repeats a few lines of each, so
// that counters grow while they are scraped.
func buildLogs(t *testing.T, corpus []corpusLine) (first, second logData) {
	d := logData{kernel: map[string][]kline{}}
	for _, l := range corpus {
		switch {
		case l.Label == "xid" && strings.Contains(l.Message, "NVRM: Xid ("):
			d.kernel["gpu-1"] = append(d.kernel["gpu-1"], kline{text: l.Message, xid: l.XidCode})
		case l.Label == "sxid":
			d.kernel["gpu-1"] = append(d.kernel["gpu-1"], kline{text: l.Message, sxid: strings.TrimPrefix(l.XidCode, "S")})
		case l.Label == "gpu_fallen_off_bus", l.Label == "eth_link_down", l.Label == "ib_link_down",
			l.Label == "pcie_aer_fatal", l.Label == "pcie_aer_nonfatal":
			d.kernel["gpu-1"] = append(d.kernel["gpu-1"], kline{text: l.Message})
		case l.Label == "pcie_aer_corrected":
			d.kernel["gpu-2"] = append(d.kernel["gpu-2"], kline{text: l.Message})
		case l.Label == "nccl_error_trace":
			d.podNoise = append(d.podNoise, l.Message)
		case strings.HasPrefix(l.Label, "nccl_"), strings.HasPrefix(l.Label, "cuda_"), strings.HasPrefix(l.Label, "dist_"):
			// Only the lines the pod pack acts on: the corpus keeps whole printed
			// groups (tracebacks, NCCL trace lines) under their event's label.
			if podPackActs(t, l.Message) {
				d.podFaults = append(d.podFaults, l.Message)
			}
		}
	}
	for _, r := range networkRules(t) {
		if r.ID != "link-down" && r.ID != "ib-port-down" && r.ID != "link-flap" {
			continue
		}
		for _, tc := range r.Tests {
			for _, l := range append([]string{tc.Line}, tc.Lines...) {
				if l != "" {
					d.kernel["gpu-2"] = append(d.kernel["gpu-2"], kline{text: l})
				}
			}
		}
	}
	// Formats the pack's comments document beyond its tests, and bonding lines (not counted).
	for _, l := range []string{
		"ice 0000:17:00.0 eth2: NIC Link is Down",
		"e1000e: eth0 NIC Link is Down",
		"mlx4_en: eth2: Link Down",
		"bond0: link status down for interface eno4, disabling it in 200 ms",
		"bond0: (slave ens1f0): link status definitely down, disabling slave",
	} {
		d.kernel["gpu-2"] = append(d.kernel["gpu-2"], kline{text: l})
	}
	xids, sxids := d.codes(func(l kline) string { return l.xid }), d.codes(func(l kline) string { return l.sxid })
	if len(xids["gpu-1"]) < 10 || len(sxids["gpu-1"]) == 0 || len(d.podFaults) < 10 || len(d.kernel["gpu-2"]) < 20 {
		t.Fatalf("corpus selection too small: %d Xid codes, %d SXid codes, %d pod fault lines, %d gpu-2 lines",
			len(xids["gpu-1"]), len(sxids["gpu-1"]), len(d.podFaults), len(d.kernel["gpu-2"]))
	}
	second = logData{kernel: map[string][]kline{}, podFaults: d.podFaults[:3], podNoise: d.podNoise[:1]}
	for n, ls := range d.kernel {
		second.kernel[n] = ls[:3]
	}
	return d, second
}

// networkRules returns the network pack's rules as the controller loads them.
// podPackActs reports whether the default packs match a training-pod line at warning
// or above.
func podPackActs(t *testing.T, line string) bool {
	t.Helper()
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	acts := false
	err = scan.New(e, scan.Options{}).Scan(context.Background(), strings.NewReader(line+"\n"), func(m scan.Match) error {
		acts = acts || m.Severity.Rank() >= rules.SeverityWarning.Rank()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

func networkRules(t *testing.T) []rules.Rule {
	t.Helper()
	ps, err := packs.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Metadata.Name == "network" {
			return p.Spec.Rules
		}
	}
	t.Fatal("no network pack")
	return nil
}

// linkDowns counts, per NIC, the lines the network pack's link-flap rule counts as a
// link going down: the interface it captures, or "<ibdev> port <n>" for an HCA port
// (the device from the ib-port-down rule).
func linkDowns(t *testing.T, lines []string) map[string]int {
	var flap, ib *regexp.Regexp
	for _, r := range networkRules(t) {
		switch r.ID {
		case "link-flap":
			flap = regexp.MustCompile(r.Match.Regex)
		case "ib-port-down":
			ib = regexp.MustCompile(r.Match.Regex)
		}
	}
	if flap == nil || ib == nil {
		t.Fatal("the network pack has no link-flap or ib-port-down rule")
	}
	out := map[string]int{}
	for _, l := range lines {
		m := flap.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if ifname := m[flap.SubexpIndex("ifname")]; ifname != "" {
			out[ifname]++
			continue
		}
		im := ib.FindStringSubmatch(l)
		if im == nil {
			t.Fatalf("link-flap matches %q but ib-port-down does not", l)
		}
		out[im[ib.SubexpIndex("ibdev")]+" port "+im[ib.SubexpIndex("port")]]++
	}
	return out
}

// kmsgEscape escapes text as the kernel does in /dev/kmsg records.
func kmsgEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c >= 127 || c == '\\' {
			fmt.Fprintf(&b, `\x%02x`, c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// kmsgFile is a file in /dev/kmsg's record format that an exporter reads and follows.
type kmsgFile struct {
	path string
	seq  int
}

// write appends lines as records stamped over the last millisecond per line, with the
// given malformed records among them.
func (k *kmsgFile) write(t *testing.T, lines []kline, malformed ...string) {
	t.Helper()
	boot, err := kmsg.BootTime()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Since(boot).Microseconds()
	var b strings.Builder
	for i, l := range lines {
		k.seq++
		fmt.Fprintf(&b, "3,%d,%d,-;%s\n", k.seq, now-int64(len(lines)-i)*1000, kmsgEscape(l.text))
		if i == len(lines)/2 {
			for _, m := range malformed {
				b.WriteString(m + "\n")
			}
		}
	}
	f, err := os.OpenFile(k.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
}

// criLog is a container's log file as the kubelet writes it (CRI format).
type criLog struct {
	mu     sync.Mutex
	f      *os.File
	stream string
}

func newCRILog(t *testing.T, podsDir, namespace, pod, container, stream string) *criLog {
	t.Helper()
	dir := filepath.Join(podsDir, fmt.Sprintf("%s_%s_6a7c1f0e-0000-4000-8000-%012d", namespace, pod, len(pod)), container)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &criLog{f: f, stream: stream}
}

func (c *criLog) line(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.f, "%s %s F %s\n", time.Now().UTC().Format(time.RFC3339Nano), c.stream, s)
}

// writer turns what a process prints into CRI lines of this log, and keeps a copy in raw.
func (c *criLog) writer(t *testing.T, raw string) io.Writer {
	rf, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.line(sc.Text())
			fmt.Fprintln(rf, sc.Text())
		}
	}()
	t.Cleanup(func() { pw.Close(); <-done; rf.Close() })
	return pw
}

// start runs a faultline component until the test ends.
func start(t *testing.T, w io.Writer, env []string, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// call sends a request, without credentials: the controller's plain port (its
// metrics), Loki and Prometheus take none.
func call(method, u, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return http.DefaultClient.Do(req)
}

func getJSON(u string, out any) error {
	resp, err := call(http.MethodGet, u, "", nil)
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

// stack is the running system the dashboards look at.
type stack struct {
	env *testenv.Env
	api string // the controller's API
	// written is what the nodes logged: the panels must count exactly that.
	written logData
	kmsg    map[string]*kmsgFile
	trainer *criLog
	// nvml counts the NVML Xid lines pushed (pushNVML) by code, all of gpu-1.
	nvml map[string]int
	// rawLogs holds each component's output, shown when the test fails.
	rawLogs string
	// step is what the stack was waiting for last: the dumps after a failure name it.
	step string
}

// startStack runs Kubernetes, Loki (behind the OpenTelemetry Collector), Prometheus,
// the controller, and a probe agent and an exporter on each of gpu-1 and gpu-2 (gpu-1's
// exporter ships through the collector, gpu-2's pushes to Loki directly: the chart's
// two outputs). The nodes log faults and probes run in two rounds, the second once
// Prometheus has scraped the first, so rates are not zero; then it waits until Loki and
// Prometheus have it all.
func startStack(t *testing.T) *stack {
	env := testenv.Start(t, testenv.Options{Kubernetes: true, Collector: true, Prometheus: &testenv.PrometheusOptions{}})
	env.InstallCRD(t, v1alpha1.CRDYAML) // the chart ships it in crds/
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	first, second := buildLogs(t, readCorpus(t, root))
	s := &stack{env: env, kmsg: map[string]*kmsgFile{}}
	cs := env.Clientset()
	ctx := context.Background()
	for _, n := range []string{"gpu-1", "gpu-2"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The controller calls the agents with a ServiceAccount token bound to the runner role.
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
	s.rawLogs = filepath.Join(dir, "logs")
	if err := os.MkdirAll(s.rawLogs, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs(t)
		}
	})
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	// The CUDA programs' stand-in with recorded outputs (GPU 3 of gpu-1 is slow on
	// pciebw); iperf3 and ping are the real programs.
	fakes := testenv.BuildFakeGPUPrograms(t)
	recorded := filepath.Join(root, "active-probes", "checks", "testdata", "recorded")
	bin, agentBin := testenv.BuildFaultline(t), testenv.BuildProbeAgent(t)
	ports := testenv.FreePorts(t, 6)
	agentPort := map[string]int{"gpu-1": ports[0], "gpu-2": ports[1]}
	exporterPort := map[string]int{"gpu-1": ports[2], "gpu-2": ports[3]}
	controllerPort, iperf3Port := ports[4], ports[5]
	podsDir := map[string]string{"gpu-1": filepath.Join(dir, "gpu-1", "pods"), "gpu-2": filepath.Join(dir, "gpu-2", "pods")}
	pciebw := map[string]string{"gpu-1": "dgxa100-gpu3-slow-gpu5-x8.jsonl", "gpu-2": "dgxa100-pass.jsonl"}

	// The agents: their stdout is their pod's log on their node.
	for _, n := range []string{"gpu-1", "gpu-2"} {
		log := newCRILog(t, podsDir[n], "faultline", "faultline-probe-agent-"+n, "probe-agent", "stdout")
		start(t, log.writer(t, filepath.Join(s.rawLogs, "agent-"+n+".log")), []string{
			"FAULTLINE_FAKE_OUTPUT_PCIEBW=" + filepath.Join(recorded, "pciebw", pciebw[n]),
			"FAULTLINE_FAKE_OUTPUT_DGEMM=" + filepath.Join(recorded, "dgemm", "dgxa100-pass.jsonl"),
		}, agentBin, "--node", n, "--listen", fmt.Sprintf("127.0.0.1:%d", agentPort[n]), "--kubeconfig", env.Kubeconfig(),
			"--command", "pciebw="+filepath.Join(fakes, "pciebw"), "--command", "dgemm="+filepath.Join(fakes, "dgemm"),
			"--command", "ping="+testenv.Binary(t, "ping"), "--command", "iperf3="+testenv.Binary(t, "iperf3"),
			// Agents on loopback: loopback peers; a kubelet API that reports no GPU pods.
			"--allow-peer=127.0.0.0/8", fmt.Sprintf("--allow-port=%d", iperf3Port),
			"--pod-resources-socket="+testenv.StartPodResources(t).Socket, "--max-runs-per-minute=6000")
	}
	// A training pod on gpu-2, and the controller on gpu-1: its stderr is its pod's log.
	s.trainer = newCRILog(t, podsDir["gpu-2"], "training", "llm-pretrain-0", "trainer", "stderr")
	controllerLog := newCRILog(t, podsDir["gpu-1"], "faultline", "faultline-controller-0", "controller", "stderr")

	// The kernel logs, and an exporter per node.
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("8e1f4c3a-0000-4000-8000-000000000001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.write(t, first)
	for _, n := range []string{"gpu-1", "gpu-2"} {
		out := []string{"--otlp-endpoint", env.OTLPEndpoint()}
		if n == "gpu-2" {
			out = []string{"--loki-url", env.LokiURL()}
		}
		f, err := os.Create(filepath.Join(s.rawLogs, "exporter-"+n+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		start(t, f, nil, bin, append([]string{"dmesg-exporter", "--node", n, "--kmsg-path", s.kmsg[n].path, "--boot-id-path", bootID,
			"--state-file", filepath.Join(dir, n, "state.json"), "--pod-logs", podsDir[n],
			"--listen", fmt.Sprintf("127.0.0.1:%d", exporterPort[n]), "--batch-wait", "200ms"}, out...)...)
	}
	s.api = fmt.Sprintf("http://127.0.0.1:%d", controllerPort)
	controller := start(t, controllerLog.writer(t, filepath.Join(s.rawLogs, "controller.log")), nil, bin, "controller",
		"--kubeconfig", env.Kubeconfig(), "--namespace", "faultline", "--identity", "faultline-controller-0",
		"--loki-url", env.LokiURL(), "--listen", fmt.Sprintf("127.0.0.1:%d", controllerPort), "--initial-lookback", "1h",
		"--budget-percent", "100", "--reconcile-interval", "1s", "--packs", writeLifecyclePacks(t), "--fleet-min-nodes", "2",
		"--probe-agent", fmt.Sprintf("gpu-1=http://127.0.0.1:%d", agentPort["gpu-1"]),
		"--probe-agent", fmt.Sprintf("gpu-2=http://127.0.0.1:%d", agentPort["gpu-2"]),
		"--probe-token-file", tokenFile)
	env.AddScrapeTarget(t,
		testenv.ScrapeTarget{Job: "faultline-controller", Address: fmt.Sprintf("127.0.0.1:%d", controllerPort)},
		testenv.ScrapeTarget{Job: "faultline-dmesg-exporter", Address: fmt.Sprintf("127.0.0.1:%d", exporterPort["gpu-1"])},
		testenv.ScrapeTarget{Job: "faultline-dmesg-exporter", Address: fmt.Sprintf("127.0.0.1:%d", exporterPort["gpu-2"])},
		testenv.ScrapeTarget{Job: "faultline-probe-agent", Address: fmt.Sprintf("127.0.0.1:%d", agentPort["gpu-1"])},
		testenv.ScrapeTarget{Job: "faultline-probe-agent", Address: fmt.Sprintf("127.0.0.1:%d", agentPort["gpu-2"])})
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLive(t)
			dumpGoroutines(t, controller, filepath.Join(s.rawLogs, "controller.log"))
		}
	})
	s.step = "the controller to lead"
	eventually.True(t, time.Minute, s.step, func() bool {
		resp, err := call(http.MethodGet, s.api+"/metrics", "", nil)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return err == nil && strings.Contains(string(b), "\nfaultline_controller_leader 1\n")
	})
	s.step = "gpu-1 tainted"
	eventually.True(t, time.Minute, s.step, func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
		return err == nil && len(n.Spec.Taints) > 0
	})

	// Probes: every check with values on gpu-1 (iperf3 to gpu-2's agent), and on gpu-2.
	s.probe(t, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-1"}, Checks: []string{"nvml", "pciebw", "dgemm", "ping", "iperf3"}, Force: true,
		Params: map[string]map[string]string{"ping": {"peer": "127.0.0.1", "count": "2"},
			"iperf3": {"peer_node": "gpu-2", "port": strconv.Itoa(iperf3Port), "seconds": "1", "min_gbps": "0.1"}}})
	s.probe(t, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-2"}, Checks: []string{"pciebw", "dgemm", "ping"}, Force: true,
		Params: map[string]map[string]string{"ping": {"peer_node": "gpu-1", "count": "2"}}})
	s.waitShipped(t)
	// The controller reads a page of lines at a time and counts it once it has acted
	// on every line (one Node update per fault): wait until it has.
	var read float64
	s.step = "the controller to read the kernel and pod lines"
	eventually.True(t, 2*time.Minute, s.step, func() bool {
		r, err := promQuery(env.PrometheusURL(), `faultline_loki_lines_total{query=~"kernel|pod"}`, true, window{})
		if err != nil || len(r.Series) != 2 {
			return false
		}
		read = r.lasts("query")["kernel"]
		return true
	})

	// The second round, seen by Prometheus as increases.
	s.write(t, second)
	s.probe(t, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-1", "gpu-2"}, Checks: []string{"pciebw", "ping"}, Force: true,
		Params: map[string]map[string]string{"ping": {"peer": "127.0.0.1", "count": "2"}}})
	s.waitShipped(t)
	s.step = "the controller to read the second batch"
	eventually.True(t, 2*time.Minute, s.step, func() bool {
		r, err := promQuery(env.PrometheusURL(), `faultline_loki_lines_total{query="kernel"}`, true, window{})
		return err == nil && len(r.Series) == 1 && r.Series[0].last() > read
	})
	s.step = "both agents' second ping results in Loki"
	eventually.True(t, time.Minute, s.step, func() bool {
		r, err := lokiQuery(env.LokiURL(), `sum by (node) (count_over_time({source="pod"} |= "probe result" |= "\"component\":\"probe-agent\"" |= "\"check\":\"ping\"" [1h]))`, true, window{})
		return err == nil && len(r.Series) == 2 && r.Series[0].last() >= 2 && r.Series[1].last() >= 2
	})
	s.step = "the NVML lines in Loki"
	s.pushNVML(t)
	s.step = "the lifecycle seed"
	s.seedLifecycle(t)
	time.Sleep(3 * time.Second) // a few more scrapes
	s.step = "the dashboards' queries"
	return s
}

// write appends lines to the nodes' kernel logs (with one malformed record on gpu-2)
// and the training pod's log.
func (s *stack) write(t *testing.T, d logData) {
	t.Helper()
	for _, n := range []string{"gpu-1", "gpu-2"} {
		k := s.kmsg[n]
		if k == nil {
			k = &kmsgFile{path: filepath.Join(filepath.Dir(s.rawLogs), n, "kmsg")}
			if err := os.MkdirAll(filepath.Dir(k.path), 0o755); err != nil {
				t.Fatal(err)
			}
			s.kmsg[n] = k
		}
		var malformed []string
		if n == "gpu-2" {
			malformed = []string{"this is not a kernel log record"}
		}
		k.write(t, d.kernel[n], malformed...)
	}
	for i, l := range d.podFaults {
		s.trainer.line(l)
		if i < len(d.podNoise) {
			s.trainer.line(d.podNoise[i])
		}
	}
	s.written.add(d)
}

// waitShipped waits until Loki holds every kernel line written and Prometheus has
// scraped the exporters' counts of them.
func (s *stack) waitShipped(t *testing.T) {
	t.Helper()
	want := 0
	for _, ls := range s.written.kernel {
		want += len(ls)
	}
	s.step = fmt.Sprintf("%d kernel lines in Loki and Prometheus", want)
	eventually.True(t, time.Minute, fmt.Sprintf("%d kernel lines in Loki", want), func() bool {
		r, err := lokiQuery(s.env.LokiURL(), `sum by (node) (count_over_time({source="kernel"} [1h]))`, true, window{})
		if err != nil || len(r.Series) != 2 {
			return false
		}
		for _, se := range r.Series {
			if int(se.last()) != len(s.written.kernel[se.Labels["node"]]) {
				return false
			}
		}
		return true
	})
	eventually.True(t, time.Minute, fmt.Sprintf("Prometheus to scrape %d kernel lines shipped", want), func() bool {
		r, err := promQuery(s.env.PrometheusURL(), `sum(faultline_exporter_records_shipped_total{source="kernel"})`, true, window{})
		return err == nil && len(r.Series) == 1 && int(r.Series[0].last()) == want
	})
}

// dumpGoroutines stops a component with SIGQUIT and shows the goroutines of its
// stack dump that run faultline's code: where a stalled stage waits.
func dumpGoroutines(t *testing.T, cmd *exec.Cmd, rawLog string) {
	if cmd.Process.Signal(syscall.SIGQUIT) != nil {
		return
	}
	_ = cmd.Wait()
	var out []byte
	for range 50 { // the log's copier writes the dump out after the exit
		time.Sleep(100 * time.Millisecond)
		b, _ := os.ReadFile(rawLog)
		if len(b) == len(out) && len(b) > 0 {
			break
		}
		out = b
	}
	_, dump, ok := strings.Cut(string(out), "SIGQUIT: quit")
	if !ok {
		t.Logf("--- no goroutine dump in %s", filepath.Base(rawLog))
		return
	}
	// Each goroutine shortened to its state and faultline's frames (function and
	// file:line, the innermost first: where it waits); alike ones are counted once.
	count := map[string]int{}
	var order []string
	for _, g := range strings.Split(strings.TrimSpace(dump), "\n\n") {
		lines := strings.Split(g, "\n")
		state := lines[0]
		if i := strings.Index(state, "["); i >= 0 {
			state = state[i:]
		}
		kept := []string{state}
		for i := 1; i+1 < len(lines); i++ {
			if strings.HasPrefix(lines[i], "github.com/faultline-dev/faultline/") { // a frame, not "created by"
				fn := lines[i][:max(strings.LastIndex(lines[i], "("), 0)]
				file, _, _ := strings.Cut(strings.TrimSpace(lines[i+1]), " ")
				kept = append(kept, "  "+fn+" "+filepath.Base(file))
			}
		}
		if len(kept) == 1 {
			continue
		}
		k := strings.Join(kept, "\n")
		if count[k]++; count[k] == 1 {
			order = append(order, k)
		}
	}
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "%d × %s\n", count[k], k)
	}
	t.Logf("--- %s: the goroutines in faultline's code\n%s", filepath.Base(rawLog), b.String())
}

// dumpLogs shows the end of each component's output.
func (s *stack) dumpLogs(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(s.rawLogs, "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("--- %s (last %d lines)\n%s", filepath.Base(f), len(lines), strings.Join(lines, "\n"))
	}
}

// probe runs probes as a ProbeRun (as the cluster's admin) and waits for its
// result. A run the agent refused because another invasive probe (a rule's
// confirming probe) was running is tried again.
func (s *stack) probe(t *testing.T, spec v1alpha1.ProbeRunSpec) {
	t.Helper()
	s.step = fmt.Sprintf("the probe run of %v on %v", spec.Checks, spec.Nodes)
	rc, err := v1alpha1.NewRESTClient(s.env.Clientset())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eventually.NoError(t, time.Minute, "a probe run that no other invasive probe held up", func() error {
		pr := &v1alpha1.ProbeRun{}
		err := rc.Post().Resource(v1alpha1.ProbeRunResource).Body(&v1alpha1.ProbeRun{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}, Spec: spec}).Do(ctx).Into(pr)
		if err != nil {
			t.Fatalf("create ProbeRun %+v: %v", spec, err)
		}
		name := pr.Name
		eventually.True(t, time.Minute, "probe run "+name, func() bool {
			pr = &v1alpha1.ProbeRun{}
			return rc.Get().Resource(v1alpha1.ProbeRunResource).Name(name).Do(ctx).Into(pr) == nil && pr.Status.Finished()
		})
		if pr.Status.Phase != v1alpha1.ProbeRunCompleted {
			t.Fatalf("probe run %s: %+v", name, pr.Status)
		}
		// The refusal is the node's error when the whole run was refused, or a check's
		// when the agent ran the run's other checks (ping beside a refused pciebw).
		for _, nr := range pr.Status.Nodes {
			if strings.Contains(nr.Error, "one at a time") {
				return fmt.Errorf("%s: %s", nr.Node, nr.Error)
			}
			for _, r := range nr.Results {
				if r.Status == "error" && strings.Contains(r.Message, "one at a time") {
					return fmt.Errorf("%s: %s: %s", nr.Node, r.Check, r.Message)
				}
			}
		}
		for _, nr := range pr.Status.Nodes {
			if nr.Error != "" {
				t.Fatalf("probe run on %s: %s", nr.Node, nr.Error)
			}
			var got []string
			for _, r := range nr.Results {
				got = append(got, fmt.Sprintf("%s %s %s", r.Check, r.Status, r.Message))
			}
			t.Logf("probes on %s: %s", nr.Node, strings.Join(got, "; "))
		}
		return nil
	})
}

// dumpLive shows the controller's metrics and Prometheus's view of its targets.
func (s *stack) dumpLive(t *testing.T) {
	var targets struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if resp, err := call(http.MethodGet, s.api+"/metrics", "", nil); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ms []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "faultline_") && !strings.Contains(l, "_bucket{") {
				ms = append(ms, l)
			}
		}
		t.Logf("--- the controller's metrics, after a failure waiting for %s\n%s", s.step, strings.Join(ms, "\n"))
	}
	if err := getJSON(s.env.PrometheusURL()+"/api/v1/targets", &targets); err == nil {
		for _, tg := range targets.Data.ActiveTargets {
			t.Logf("prometheus target %s: %s %s", tg.ScrapeURL, tg.Health, tg.LastError)
		}
	}
}

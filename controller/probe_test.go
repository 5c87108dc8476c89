package controller_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/active-probes/pvc"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const aerNonFatal = "pcieport 0000:80:03.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:81:00.0"

// pciebwOutput writes what cuda/pciebw prints for 8 A100s, GPU 3 at slowGBps and the
// others at 12 GB/s, and returns the file.
func pciebwOutput(t *testing.T, path string, slowGBps float64) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < 8; i++ {
		bw := 12.0
		if i == 3 {
			bw = slowGBps
		}
		fmt.Fprintf(&b, `{"gpu":%d,"pci":"0000:%02x:00.0","name":"NVIDIA A100-SXM4-80GB","h2d_gbps":%.2f,"d2h_gbps":%.2f,"bytes":268435456,"iters":20}`+"\n",
			i, 0x07+i*8, bw, bw-0.1)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent runs faultline-probe-agent for a node as its own process (each with
// its own fake pciebw output) and returns its URL.
func startAgent(t *testing.T, bin, kubeconfig, node, fakes, output string, extra ...string) string {
	t.Helper()
	// A kubelet API that reports no GPU pods.
	args := append([]string{"--pod-resources-socket=" + testenv.StartPodResources(t).Socket}, extra...)
	return startAgentEnv(t, bin, kubeconfig, node, fakes, []string{"FAULTLINE_FAKE_OUTPUT=" + output}, args...)
}

// startAgentEnv runs faultline-probe-agent for a node with the fake GPU programs
// in fakes, env added to its environment (the fakes' outputs) and args added to its
// flags (a kubelet socket: --pod-resources-socket), and returns its URL.
func startAgentEnv(t *testing.T, bin, kubeconfig, node, fakes string, env []string, extra ...string) string {
	t.Helper()
	// The agents listen on loopback, so their peers are loopback addresses; probe
	// rounds far more often than a real cluster's.
	args := append([]string{"--node", node, "--listen", "127.0.0.1:0", "--kubeconfig", kubeconfig,
		"--command", "pciebw=" + filepath.Join(fakes, "pciebw"), "--command", "dgemm=" + filepath.Join(fakes, "dgemm"),
		"--allow-peer=127.0.0.0/8", "--max-runs-per-minute=6000"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "probe-agent started" {
				addr <- fmt.Sprint(rec["listen"])
			}
			if testing.Verbose() {
				fmt.Fprintf(os.Stderr, "agent %s: %s\n", node, sc.Text())
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("probe agent for %s did not start", node)
		return ""
	}
}

// probeSetup: nodes gpu-a (GPU 3 at 2 GB/s) and gpu-b (12 GB/s) with one agent each,
// and a controller whose ServiceAccount holds faultline-probe-runner.
type probeSetup struct {
	cl      *cluster
	agents  map[string]string
	outputs map[string]string
	token   string
}

func newProbeSetup(t *testing.T) *probeSetup {
	// kube-controller-manager too: the pvc check's claims bind and are deleted for real.
	cl := newClusterWith(t, testenv.Options{ControllerManager: true, Loki: true}, "gpu-a", "gpu-b", "gpu-c", "gpu-d")
	// The real iperf3 and ping, for the network probes between agents.
	net := []string{"--command", "iperf3=" + testenv.Binary(t, "iperf3"), "--command", "ping=" + testenv.Binary(t, "ping")}
	bin := testenv.BuildProbeAgent(t)
	fakes := testenv.BuildFakeGPUPrograms(t)
	dir := t.TempDir()
	s := &probeSetup{cl: cl, agents: map[string]string{}, outputs: map[string]string{}}
	for node, bw := range map[string]float64{"gpu-a": 2.0, "gpu-b": 12.0} {
		s.outputs[node] = pciebwOutput(t, filepath.Join(dir, node+".jsonl"), bw)
		s.agents[node] = startAgent(t, bin, cl.env.Kubeconfig(), node, fakes, s.outputs[node], net...)
	}
	s.token = cl.env.ServiceAccountToken(t, ns, "faultline-controller")
	cl.bindProbeRunner()
	return s
}

// bindProbeRunner gives the controller's ServiceAccount faultline-probe-runner, the
// role the agents check.
func (cl *cluster) bindProbeRunner() {
	t := cl.t
	t.Helper()
	_, runner, err := rbac.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.cs.RbacV1().ClusterRoles().Create(ctx, runner, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "faultline-probe-runner"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: runner.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "faultline-controller"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (s *probeSetup) probeConfig() trigger.Config {
	tok := s.token
	return trigger.Config{AgentURLs: s.agents, Token: func() (string, error) { return tok, nil },
		RecoverEvery: 500 * time.Millisecond, ConfirmTimeout: time.Minute}
}

func (cl *cluster) label(node, key string) string { return cl.node(node).Labels[key] }

// The loop the issue asks for: a PCIe AER line triggers pciebw through the rule's
// action probe; on gpu-a the fake program reports 2 GB/s on one GPU and the node is
// tainted, with the probe's verdict in its evidence; on gpu-b (12 GB/s) it is not.
// Then gpu-a is repaired (12 GB/s) and its recovery probes untaint it.
func TestAERProbeTaint(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	dir := t.TempDir()
	// The default pack waits 24h before recovery probes; this site lets them decide.
	pack := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: aer-nonfatal
      recover: {probes: [pciebw]}
`
	if err := os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(pack), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cl.start(options{packs: []string{dir}, decide: decide.Config{MaxPercent: 50}, probes: s.probeConfig()})
	t0 := time.Now()
	cl.push("gpu-a", time.Now(), aerNonFatal)
	cl.push("gpu-b", time.Now(), aerNonFatal)

	cl.waitFor("gpu-a tainted after its probe failed", 60*time.Second, func() bool { return cl.tainted("gpu-a") })
	t.Logf("AER line to taint through the probe: %s", time.Since(t0).Round(time.Millisecond))
	cl.waitFor("gpu-b probed", 60*time.Second, func() bool { return cl.label("gpu-b", trigger.LabelHealth) == trigger.HealthPass })
	if cl.tainted("gpu-b") {
		t.Fatal("gpu-b tainted although its probe passed")
	}
	// A passed confirmation dismisses the fault: Resolved (ProbePassed), never
	// Observed (kept for faults recorded without acting).
	eventually.NoError(t, 20*time.Second, "gpu-b's NodeFault Resolved (ProbePassed) with the passed verdict", func() error {
		nf, err := cl.record("gpu-b", "pcie-aer", aerRule)
		if err != nil {
			return err
		}
		if nf.Status.Phase != v1alpha1.PhaseResolved || nf.Status.Reason != trigger.ReasonProbePassed || nf.Status.ResolvedAt == nil ||
			len(nf.Status.Probes) == 0 || nf.Status.Probes[len(nf.Status.Probes)-1].Verdict != "passed" {
			return fmt.Errorf("gpu-b's record: phase %s (%s), probes %+v", nf.Status.Phase, nf.Status.Reason, nf.Status.Probes)
		}
		return nil
	})
	// A recovery probe of gpu-a may be running now (TESTING); it fails again, so the
	// label settles on FAIL.
	cl.waitFor("gpu-a health label FAIL", 20*time.Second, func() bool { return cl.label("gpu-a", trigger.LabelHealth) == trigger.HealthFail })
	// The record says Placed in the same write as the decision's phase, history
	// entry and evidence (the probe's verdict was written before): never one without
	// the other.
	var nf *v1alpha1.NodeFault
	eventually.NoError(t, 20*time.Second, "gpu-a's NodeFault records its taint", func() error {
		var err error
		nf, err = cl.record("gpu-a", "pcie-aer", aerRule)
		if err != nil || nf.Status.Taint == nil || nf.Status.Taint.State != v1alpha1.TaintPlaced {
			return fmt.Errorf("gpu-a's NodeFault: %+v %v", nf, err)
		}
		return nil
	})
	lines, _ := json.Marshal(nf.Status)
	for _, want := range []string{"AER: Uncorrectable (Non-Fatal)", "probe: pciebw fail", "3: fail"} {
		if !strings.Contains(string(lines), want) {
			t.Errorf("gpu-a's NodeFault says Placed, its evidence lacks %q: %s", want, lines)
		}
	}
	// Recovering too: the recovery probes (every 500 ms here) may have started since
	// the taint, and they move the phase on from Tainted without a decision of their own.
	if st := nf.Status; (st.Phase != v1alpha1.PhaseTainted && st.Phase != v1alpha1.PhaseRecovering) ||
		len(st.History) == 0 || st.History[len(st.History)-1].Kind != string(decide.KindTaint) {
		t.Errorf("gpu-a's NodeFault says Placed without its decision (phase %q, history %+v)", st.Phase, st.History)
	}
	cl.waitFor("a ProbeFailed Event on gpu-a and a ProbePassed Event on gpu-b", 10*time.Second, func() bool {
		return len(cl.events("gpu-a", "ProbeFailed")) > 0 && len(cl.events("gpu-b", "ProbePassed")) > 0
	})
	if n := testutil.ToFloat64(r.m.ProbeResults().WithLabelValues("pciebw", "fail", "rule")); n != 1 {
		t.Errorf("pciebw fail results from rules: %v, want 1", n)
	}

	// Repair: gpu-a's links are fine again; its recovery probe passes and untaints it.
	pciebwOutput(t, s.outputs["gpu-a"], 12.5)
	t1 := time.Now()
	cl.waitFor("gpu-a untainted by its recovery probe", 60*time.Second, func() bool { return !cl.tainted("gpu-a") })
	t.Logf("repair to untaint: %s", time.Since(t1).Round(time.Millisecond))
	cl.waitFor("gpu-a health PASS", 10*time.Second, func() bool { return cl.label("gpu-a", trigger.LabelHealth) == trigger.HealthPass })
	if n := testutil.ToFloat64(r.m.ProbeResults().WithLabelValues("pciebw", "pass", "recovery")); n < 1 {
		t.Errorf("no passing recovery probe counted")
	}
}

// Manual triggers besides ProbeRun objects (proberuns_test.go): a run started in the
// controller (pvc), Autopilot's /status and the CLI, against the same agents.
func TestManualProbes(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	pc := s.probeConfig()
	pc.Registry = probe.Default().With(pvc.Spec(cl.cs, ns))
	pc.Local = probe.NewRunner(pc.Registry, probe.Config{}, nil)
	r := cl.start(options{probes: pc})
	opToken := cl.operator()
	srv := cl.statusServer(r)

	// The pvc check runs in the controller, once per run (node "" in the run): a class
	// with no volumes (no controller-manager here either) fails after its timeout.
	pvcRun, err := r.c.Triggers().Start(context.Background(), trigger.Request{Nodes: []string{"gpu-a"}, Checks: []string{"pvc"},
		Params: map[string]probe.Params{"pvc": {"storage_class": "nowhere", "timeout": "1s"}}}, proberun.TriggerManual)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	pvcRun, err = r.c.Triggers().Dispatcher().Wait(wctx, pvcRun.ID)
	wcancel()
	if err != nil || len(pvcRun.Nodes) != 1 || pvcRun.Nodes[0].Node != proberun.ClusterNode || pvcRun.Nodes[0].Status != probe.StatusFail {
		t.Errorf("pvc run: %+v %v", pvcRun, err)
	}

	// Autopilot-compatible /status: a ProbeRun in the operator's name.
	_, text := getStatus(t, srv, "/status?check=pciebw&host=gpu-a,gpu-b&batch=1", opToken)
	for _, want := range []string{"Node: gpu-a\n[[ PCIEBW ]] FAIL", "Node: gpu-b\n[[ PCIEBW ]] SUCCESS", "Node Status: Err", "Node Status: Ok",
		"h2d_gbps=2"} {
		if !strings.Contains(text, want) {
			t.Errorf("/status lacks %q:\n%s", want, text)
		}
	}

	// Autopilot's r is the dcgm level (2 is invasive; no dcgmi on this machine: the
	// result says so instead of passing).
	// format=json: the ProbeRun.
	code, body := getStatus(t, srv, "/status?check=dcgm&host=gpu-b&r=2&format=json", opToken)
	var dr v1alpha1.ProbeRun
	if err := json.Unmarshal([]byte(body), &dr); err != nil {
		t.Fatalf("/status r=2 (%d): %v: %s", code, err, body)
	}
	if nodes := dr.Status.Nodes; dr.Kind != "ProbeRun" || len(nodes) != 1 || len(nodes[0].Results) != 1 || nodes[0].Results[0].Params["level"] != "2" ||
		nodes[0].Results[0].Status == string(probe.StatusPass) {
		t.Errorf("/status r=2: %+v", dr)
	}

	// CLI: a ProbeRun with the kubeconfig's credentials; exit 0 when all passed, 2
	// when a check failed; progress on stderr.
	bin := testenv.BuildFaultline(t)
	kubeconfig := cl.kubeconfigFor(opToken)
	for _, tc := range []struct {
		node string
		code int
		want string
	}{{"gpu-b", 0, "pass"}, {"gpu-a", 2, "fail"}} {
		cmd := exec.Command(bin, "probe", "run", "--kubeconfig", kubeconfig, "--node", tc.node, "--check", "pciebw", "--wait")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(stdout.String(), "NODE") || !strings.Contains(stdout.String(), tc.want) ||
			!strings.Contains(stderr.String(), "node(s) done") {
			t.Errorf("faultline probe run --node %s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", tc.node, code, tc.code, stdout.String(), stderr.String())
		}
		t.Logf("faultline probe run --node %s --check pciebw --wait:\n%s", tc.node, stdout.String())
	}
}

// Scheduled probes run on the selected nodes at their interval and never overlap: a
// round still running when the next is due makes that round skip.
func TestScheduledProbes(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	pc := s.probeConfig()
	// A round (ping ×4 at 0.2 s, to the picked peer) outlasts the 300 ms interval.
	pc.Schedules = []trigger.Schedule{{Check: "ping", Every: 300 * time.Millisecond, Params: probe.Params{"count": "4"}}}
	pc.AgentURLs = map[string]string{"gpu-a": s.agents["gpu-a"], "gpu-b": s.agents["gpu-b"]}
	r := cl.start(options{probes: pc})
	var mu sync.Mutex
	seen := map[string]bool{}
	cl.waitFor("three scheduled rounds", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		running := 0
		for _, run := range r.c.Triggers().Dispatcher().List() {
			if run.Trigger != proberun.TriggerSchedule {
				continue
			}
			seen[run.ID] = true
			if run.State != proberun.StateDone {
				running++
			}
		}
		if running > 1 {
			t.Fatalf("%d scheduled rounds of nvml at once", running)
		}
		return len(seen) >= 3
	})
	// Every node the selector matches is in each round (nodes without an agent end
	// in an error, which the round reports rather than hides).
	run := r.c.Triggers().Dispatcher().List()[0]
	if len(run.Nodes) != 4 {
		t.Errorf("round over %d nodes, want the 4 labelled nodes", len(run.Nodes))
	}
	if n := testutil.ToFloat64(r.m.ProbeSkipped().WithLabelValues("ping")); n < 1 {
		t.Errorf("no round skipped although each outlasts the interval")
	}
}

// A scheduled nvml check expects as many GPUs as the node's nvidia.com/gpu capacity
// says, unless the schedule gives expected_gpus itself; a node without that
// capacity keeps the check's default (0: not compared).
func TestScheduledProbeExpectsNodeGPUs(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	ctx := context.Background()
	n := cl.node("gpu-a")
	n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	if _, err := cl.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pc := s.probeConfig()
	pc.Schedules = []trigger.Schedule{{Check: "nvml", Every: 300 * time.Millisecond}}
	pc.AgentURLs = map[string]string{"gpu-a": s.agents["gpu-a"], "gpu-b": s.agents["gpu-b"]}
	r := cl.start(options{probes: pc})
	expected := map[string]string{}
	cl.waitFor("a scheduled nvml round on gpu-a and gpu-b", 60*time.Second, func() bool {
		for _, run := range r.c.Triggers().Dispatcher().List() {
			for _, nr := range run.Nodes {
				for _, res := range nr.Results {
					if res.Check == "nvml" {
						expected[nr.Node] = res.Params["expected_gpus"]
					}
				}
			}
		}
		return expected["gpu-a"] != "" && expected["gpu-b"] != ""
	})
	if expected["gpu-a"] != "8" || expected["gpu-b"] != "0" {
		t.Errorf("expected_gpus: gpu-a %q (capacity 8), gpu-b %q (no capacity); want 8 and 0", expected["gpu-a"], expected["gpu-b"])
	}

	// A value the request gives, even 0, is the request's.
	run, err := r.c.Triggers().Dispatcher().Start(ctx, proberun.Request{Nodes: []string{"gpu-a"}, Checks: []string{"nvml"},
		Params: map[string]probe.Params{"nvml": {"expected_gpus": "0"}}, Trigger: proberun.TriggerManual})
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.c.Triggers().Dispatcher().Wait(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Nodes) != 1 || len(done.Nodes[0].Results) != 1 || done.Nodes[0].Results[0].Params["expected_gpus"] != "0" {
		t.Errorf("an explicit expected_gpus=0 was replaced: %+v", done.Nodes)
	}
}

// The network probes between two agents, with the real iperf3 and ping: the
// controller asks gpu-b's agent for a one-shot iperf3 server and gpu-a's agent runs
// the client against it; ping goes from gpu-a to gpu-b's address.
func TestNetworkProbesBetweenAgents(t *testing.T) {
	s := newProbeSetup(t)
	r := s.cl.start(options{probes: s.probeConfig()})
	run, err := r.c.Triggers().Start(context.Background(), trigger.Request{Nodes: []string{"gpu-a"}, Checks: []string{"iperf3", "ping"},
		Params: map[string]probe.Params{
			"iperf3": {"peer_node": "gpu-b", "seconds": "1", "min_gbps": "0.5"},
			"ping":   {"peer_node": "gpu-b", "count": "3"},
		}}, proberun.TriggerManual)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if run, err = r.c.Triggers().Dispatcher().Wait(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	nr := run.Nodes[0]
	if nr.Error != "" || len(nr.Results) != 2 {
		t.Fatalf("run: %+v", nr)
	}
	for _, res := range nr.Results {
		if res.Status != probe.StatusPass || len(res.Devices) != 1 || res.Devices[0].ID != "127.0.0.1" {
			t.Errorf("%s: %+v", res.Check, res)
			continue
		}
		t.Logf("%s gpu-a → gpu-b: %s; %v (%s)", res.Check, res.Status, res.Devices[0].Values, res.Duration.Round(time.Millisecond))
	}
	if v := nr.Results[0].Devices[0].Values["received_gbps"]; v < 0.5 {
		t.Errorf("iperf3 received %.2f Gbit/s over loopback", v)
	}
	if v := nr.Results[1].Devices[0].Values["loss_pct"]; v != 0 {
		t.Errorf("ping loss %.1f%% over loopback", v)
	}
	// No peer named (as for a rule's confirming probe): the next healthy probe node
	// with an agent is picked (gpu-b).
	run, err = r.c.Triggers().Start(context.Background(), trigger.Request{Nodes: []string{"gpu-a"}, Checks: []string{"ping"},
		Params: map[string]probe.Params{"ping": {"count": "2"}}}, proberun.TriggerManual)
	if err != nil {
		t.Fatal(err)
	}
	if run, err = r.c.Triggers().Dispatcher().Wait(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if nr := run.Nodes[0]; nr.Status != probe.StatusPass || nr.Results[0].Params["peer"] != "127.0.0.1" {
		t.Errorf("ping with a picked peer: %+v", nr)
	}
	// The same pair with an impossible minimum fails, and the peer's server was a
	// one-shot: a second run gets a fresh one.
	run, err = r.c.Triggers().Start(context.Background(), trigger.Request{Nodes: []string{"gpu-a"}, Checks: []string{"iperf3"},
		Params: map[string]probe.Params{"iperf3": {"peer_node": "gpu-b", "seconds": "1", "min_gbps": "90000"}}}, proberun.TriggerManual)
	if err != nil {
		t.Fatal(err)
	}
	if run, err = r.c.Triggers().Dispatcher().Wait(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if run.Status != probe.StatusFail {
		t.Errorf("iperf3 against 90000 Gbit/s: %+v", run.Nodes)
	}
}

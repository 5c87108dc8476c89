// Package demo is `faultline demo`: faultline's main job on one machine, with the real
// parts. It starts etcd + kube-apiserver, Loki and the OpenTelemetry Collector on
// 127.0.0.1 (the project's test harness, test/testenv, with the cached components),
// registers simulated GPU nodes, runs one dmesg-exporter per node reading its own
// kmsg-format file, the controller, and one probe agent per node, then plays a
// scenario and narrates it. With Once it checks every outcome and returns an error
// if one did not hold; otherwise it stays up until ctx ends, then cleans up.
package demo

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	agentrbac "github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/dmesg-exporter/kmsg"
	"github.com/faultline-dev/faultline/test/testenv"
)

//go:embed packs/demo.yaml
var demoPack []byte

// Options configure Run.
type Options struct {
	// Once plays the scenario, checks every outcome, prints a summary and returns.
	Once bool
	Out  io.Writer
	// Binary is the faultline executable the exporters and the controller run as
	// (default: this process's own).
	Binary string
	// Dir holds the components' data, logs and the kubeconfig (default: a new
	// temporary directory, removed at the end).
	Dir string
	// Nodes is the number of simulated GPU nodes (default 5, at least 4).
	Nodes int
	// StepTimeout bounds each step of the scenario (default 90s).
	StepTimeout time.Duration
}

const ns = "faultline"

// demo is one run.
type demo struct {
	o       Options
	out     io.Writer
	tb      *runTB
	env     *testenv.Env
	cs      kubernetes.Interface
	nodes   []string
	kmsg    map[string]*kmsgFile
	api     string // controller API
	start   time.Time
	results []result
}

type result struct {
	what string
	ok   bool
	note string
}

// Run runs the demo.
func Run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Nodes == 0 {
		o.Nodes = 5
	}
	if o.Nodes < 4 {
		return errors.New("demo: at least 4 nodes")
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 90 * time.Second
	}
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return err
		}
	}
	keep := o.Dir != ""
	if !keep {
		if o.Dir, err = os.MkdirTemp("", "faultline-demo-"); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "logs"), 0o755); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(o.Dir, "logs", "harness.log"))
	if err != nil {
		return err
	}
	d := &demo{o: o, out: o.Out, tb: &runTB{dir: o.Dir, log: logf}, kmsg: map[string]*kmsgFile{}, start: time.Now()}
	defer func() {
		d.say("\nCleaning up: stopping every process the demo started.")
		d.tb.cleanup()
		logf.Close()
		if !keep {
			os.RemoveAll(o.Dir)
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(fatal)
			if !ok {
				panic(v)
			}
			err = fmt.Errorf("demo: %s (logs in %s)", f.msg, filepath.Join(o.Dir, "logs"))
			keep = true
		}
	}()
	d.up(ctx)
	d.scenario(ctx)
	if o.Once {
		return d.summary()
	}
	d.tryIt()
	<-ctx.Done()
	return nil
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func (d *demo) step(format string, args ...any) {
	fmt.Fprintf(d.out, "\n[%5.1fs] ", time.Since(d.start).Seconds())
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *demo) check(what string, ok bool, note string) {
	d.results = append(d.results, result{what, ok, note})
	mark := "✓"
	if !ok {
		mark = "✗"
	}
	d.say("        %s %s%s", mark, what, suffix(note))
}

func suffix(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

// up starts everything.
func (d *demo) up(ctx context.Context) {
	d.step("Starting the real components on 127.0.0.1 (built once and cached; the first run takes minutes)")
	if err := d.tools(ctx); err != nil {
		d.tb.Fatalf("components: %v", err)
	}
	t0 := time.Now()
	d.env = testenv.Start(d.tb, testenv.Options{Kubernetes: true, Collector: true})
	d.env.InstallCRD(d.tb, v1alpha1.CRDYAML) // the chart ships it in crds/
	d.cs = d.env.Clientset()
	d.say("        etcd + kube-apiserver %s, Loki %s, OpenTelemetry Collector %s — up in %s",
		d.env.APIServerURL(), d.env.LokiURL(), d.env.OTLPEndpoint(), time.Since(t0).Round(10*time.Millisecond))

	d.step("Registering %d simulated GPU nodes, faultline's ServiceAccounts and least-privilege RBAC", d.o.Nodes)
	ctrlToken, agentToken := d.cluster(ctx)

	d.step("Starting one probe agent per node (NVML: %s; ping and iperf3: the real programs)", nvmlSource)
	agents := d.agents(ctx, agentToken)

	d.step("Starting one dmesg-exporter per node, each reading its own kmsg-format file, shipping over OTLP to the collector → Loki")
	d.exporters()

	d.step("Starting the controller (its ServiceAccount's RBAC only; rule packs: the 7 built-in packs + the demo's site pack)")
	d.controller(ctx, ctrlToken, agents)
}

// tools builds or finds the pinned components with the repository's build script,
// showing its progress, and points the harness at them.
func (d *demo) tools(ctx context.Context) error {
	if os.Getenv(testenv.ToolsPathEnv) != "" {
		return nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return fmt.Errorf("run the demo from a faultline checkout (make demo): %w", err)
	}
	script := filepath.Join(root, "test", "tools", "build.sh")
	for _, c := range []string{"debian", "etcd", "otelcol", "kubernetes", "loki"} {
		cmd := exec.CommandContext(ctx, script, c)
		cmd.Stdout, cmd.Stderr = d.out, d.out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %w", script, c, err)
		}
	}
	out, err := exec.CommandContext(ctx, script, "path").Output()
	if err != nil {
		return fmt.Errorf("%s path: %w", script, err)
	}
	return os.Setenv(testenv.ToolsPathEnv, strings.TrimSpace(string(out)))
}

func (d *demo) cluster(ctx context.Context) (ctrlToken, agentToken string) {
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		d.tb.Fatalf("namespace: %v", err)
	}
	for i := 0; i < d.o.Nodes; i++ {
		name := fmt.Sprintf("gpu-%d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"}}}
		n, err := d.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			d.tb.Fatalf("node %s: %v", name, err)
		}
		// No kubelet runs here: the demo reports each node Ready, as a kubelet would,
		// and lifts the not-ready taint the apiserver put on the new Node.
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}}
		n.Status.NodeInfo.BootID = fmt.Sprintf("6d1e0b52-0000-4000-8000-%012d", i)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated by faultline demo", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if n, err = d.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			d.tb.Fatalf("node %s status: %v", name, err)
		}
		n.Spec.Taints = nil
		if _, err = d.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			d.tb.Fatalf("node %s: %v", name, err)
		}
		d.nodes = append(d.nodes, name)
	}
	ctrlToken = d.env.ServiceAccountToken(d.tb, ns, "faultline-controller")
	agentToken = d.env.ServiceAccountToken(d.tb, ns, "faultline-probe-agent")
	agentRole, runnerRole, err := agentrbac.ClusterRoles()
	if err != nil {
		d.tb.Fatal(err)
	}
	rb := d.cs.RbacV1()
	steps := []error{}
	_, e := rb.ClusterRoles().Create(ctx, rbac.ClusterRole(), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.ClusterRoleBindings().Create(ctx, rbac.ClusterRoleBinding(ns, "faultline-controller"), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.Roles(ns).Create(ctx, rbac.Role(ns), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.RoleBindings(ns).Create(ctx, rbac.RoleBinding(ns, "faultline-controller"), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.ClusterRoles().Create(ctx, agentRole, metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.ClusterRoles().Create(ctx, runnerRole, metav1.CreateOptions{})
	steps = append(steps, e)
	for _, b := range []struct{ role, sa string }{{agentRole.Name, "faultline-probe-agent"}, {runnerRole.Name, "faultline-controller"}} {
		crb := rbac.ClusterRoleBinding(ns, b.sa)
		crb.Name, crb.RoleRef.Name = b.role, b.role
		_, e = rb.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
		steps = append(steps, e)
	}
	if err := errors.Join(steps...); err != nil {
		d.tb.Fatalf("RBAC: %v", err)
	}
	d.say("        nodes %s (8 × A100 each, labelled nvidia.com/gpu.present=true)", strings.Join(d.nodes, ", "))
	d.say("        ServiceAccounts faultline/faultline-controller (ClusterRole+Role faultline-controller, faultline-probe-runner)")
	d.say("        and faultline/faultline-probe-agent (faultline-probe-agent)")
	return ctrlToken, agentToken
}

func (d *demo) agents(ctx context.Context, token string) map[string]string {
	client, err := kubernetes.NewForConfig(d.env.RESTConfigForToken(token))
	if err != nil {
		d.tb.Fatal(err)
	}
	commands := map[string]string{"ping": testenv.Binary(d.tb, "ping"), "iperf3": testenv.Binary(d.tb, "iperf3")}
	logw, err := os.Create(filepath.Join(d.o.Dir, "logs", "probe-agents.log"))
	if err != nil {
		d.tb.Fatal(err)
	}
	d.tb.Cleanup(func() { logw.Close() })
	urls := map[string]string{}
	for _, n := range d.nodes {
		u, stop, err := startAgent(ctx, n, client, commands, logw)
		if err != nil {
			d.tb.Fatalf("agent %s: %v", n, err)
		}
		d.tb.Cleanup(stop)
		urls[n] = u
	}
	d.say("        %d agents on %s … (API authenticated with TokenReview + SubjectAccessReview)", len(urls), urls[d.nodes[0]])
	return urls
}

func (d *demo) exporters() {
	for i, n := range d.nodes {
		dir := filepath.Join(d.o.Dir, "nodes", n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			d.tb.Fatal(err)
		}
		// The exporter turns kernel timestamps into wall time with the machine's boot
		// time, as on a real node: the file's timestamps count from it too.
		boot, err := kmsg.BootTime()
		if err != nil {
			d.tb.Fatal(err)
		}
		k, err := newKmsgFile(filepath.Join(dir, "kmsg"), boot)
		if err != nil {
			d.tb.Fatal(err)
		}
		d.kmsg[n] = k
		bootID := filepath.Join(dir, "boot_id")
		if err := os.WriteFile(bootID, []byte(fmt.Sprintf("6d1e0b52-0000-4000-8000-%012d\n", i)), 0o644); err != nil {
			d.tb.Fatal(err)
		}
		// A node's ordinary boot: nothing here is a fault.
		_ = k.write(6, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-115) (x86_64-linux-gnu-gcc-13) #45-Ubuntu SMP PREEMPT_DYNAMIC",
			"nvidia: loading out-of-tree module taints kernel.",
			"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
			"mlx5_core 0000:18:00.0 ens1np0: Link up",
			"IPv6: ADDRCONF(NETDEV_CHANGE): ens1np0: link becomes ready")
		d.process("dmesg-exporter-"+n, d.o.Binary, "dmesg-exporter", "--node", n, "--kmsg-path", k.path, "--boot-id-path", bootID,
			"--state-file", filepath.Join(dir, "state.json"), "--otlp-endpoint", d.env.OTLPEndpoint(),
			"--listen", "127.0.0.1:0", "--batch-wait", "200ms")
	}
	d.say("        %d exporters (logs in %s)", len(d.nodes), filepath.Join(d.o.Dir, "logs"))
}

// process runs a faultline component as its own process, logging to logs/<name>.log.
func (d *demo) process(name, bin string, args ...string) {
	logw, err := os.Create(filepath.Join(d.o.Dir, "logs", name+".log"))
	if err != nil {
		d.tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logw, logw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		d.tb.Fatalf("%s: %v", name, err)
	}
	d.tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logw.Close()
	})
}

func (d *demo) controller(ctx context.Context, token string, agents map[string]string) {
	packs := filepath.Join(d.o.Dir, "packs")
	if err := os.MkdirAll(packs, 0o755); err != nil {
		d.tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(packs, "demo.yaml"), demoPack, 0o644); err != nil {
		d.tb.Fatal(err)
	}
	kubeconfig := d.kubeconfigFor(token, "faultline-controller")
	tokenFile := filepath.Join(d.o.Dir, "controller.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		d.tb.Fatal(err)
	}
	port := testenv.FreePorts(d.tb, 1)[0]
	d.api = fmt.Sprintf("http://127.0.0.1:%d", port)
	var pairs []string
	for _, n := range d.nodes {
		pairs = append(pairs, n+"="+agents[n])
	}
	d.process("controller", d.o.Binary, "controller", "--kubeconfig", kubeconfig, "--namespace", ns,
		"--identity", "faultline-controller-demo", "--loki-url", d.env.LokiURL(), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--packs", packs, "--budget-percent", "50", "--reconcile-interval", "2s", "--initial-lookback", "10m",
		"--probe-agent", strings.Join(pairs, ","), "--probe-token-file", tokenFile, "--log-format", "text")
	d.waitFor(ctx, "the controller to lead", func() (bool, string) {
		var f struct {
			Leader bool `json:"leader"`
		}
		if err := getJSON(ctx, d.api+"/api/v1/faults", &f); err != nil {
			return false, err.Error()
		}
		return f.Leader, "not leading yet"
	})
	d.say("        controller API %s, leading; it tails Loki with LogQL built from the packs", d.api)

	// The hourly nvml round, once now through the API, so every node has a health label.
	d.step("A first round of the nvml check on every node (POST %s/api/v1/probes; scheduled hourly by default)", d.api)
	body := `{"selector":"nvidia.com/gpu.present=true","checks":["nvml"],"params":{"nvml":{"expected_gpus":"8"}}}`
	resp, err := http.Post(d.api+"/api/v1/probes", "application/json", strings.NewReader(body))
	if err != nil {
		d.tb.Fatalf("start the nvml round: %v", err)
	}
	var run struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Status string `json:"status"`
		Nodes  []struct {
			Node    string `json:"node"`
			Status  string `json:"status"`
			Results []struct {
				Message string `json:"message"`
			} `json:"results"`
		} `json:"nodes"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	took, ok, why := d.waitFor(ctx, "the nvml round", func() (bool, string) {
		if err := getJSON(ctx, d.api+"/api/v1/probes/"+run.ID, &run); err != nil {
			return false, err.Error()
		}
		return run.State == "done", "state " + run.State
	})
	if ok && len(run.Nodes) > 0 && len(run.Nodes[0].Results) > 0 {
		d.say("        run %s: %s on %d nodes in %s (%s)", run.ID, run.Status, len(run.Nodes), took.Round(time.Millisecond), run.Nodes[0].Results[0].Message)
	}
	d.check("nvml passes on every node (label faultline.io/health=PASS)", ok && run.Status == "pass", why)
}

// kubeconfigFor writes a kubeconfig that authenticates with a ServiceAccount token.
func (d *demo) kubeconfigFor(token, user string) string {
	rc := d.env.RESTConfig()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["demo"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData, CertificateAuthority: rc.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: user}
	cfg.CurrentContext = "demo"
	path := filepath.Join(d.o.Dir, user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		d.tb.Fatal(err)
	}
	return path
}

// waitFor polls cond until it holds or the step times out (a failed check, not an
// abort: the scenario goes on and the summary says what did not hold).
func (d *demo) waitFor(ctx context.Context, what string, cond func() (bool, string)) (time.Duration, bool, string) {
	t0 := time.Now()
	deadline := t0.Add(d.o.StepTimeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return time.Since(t0), true, ""
		}
		last = why
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(t0), false, fmt.Sprintf("gave up waiting for %s after %s: %s", what, d.o.StepTimeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// scenario plays the faults and checks what faultline did about each.
func (d *demo) scenario(ctx context.Context) {
	const (
		xid13 = "NVRM: Xid (PCI:0000:4e:00): 13, pid=48213, name=python3, Graphics Exception: ESR 0x504648=0x11f000e"
		xid79 = "NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	)
	d.step("Scenario 1/3: gpu-1 logs an Xid 13 (a graphics exception: usually the application's bug, not the GPU's)")
	d.say("        kernel: %s", xid13)
	_ = d.kmsg["gpu-1"].write(3, xid13)
	took, ok, why := d.waitFor(ctx, "an Event on gpu-1", func() (bool, string) {
		return len(d.events(ctx, "gpu-1", "FaultEvent")) > 0, "no FaultEvent yet"
	})
	if ok {
		ev := d.events(ctx, "gpu-1", "FaultEvent")[0]
		d.say("        → Event %s on node gpu-1 after %s: %s", ev.Reason, took.Round(time.Millisecond), clip(ev.Message, 160))
	}
	d.check("Xid 13 on gpu-1 → an Event", ok, why)
	d.check("gpu-1 not tainted", !d.tainted(ctx, "gpu-1"), "")

	d.step("Scenario 2/3: gpu-3 logs an Xid 79 (the GPU has fallen off the bus: the node must be drained)")
	d.say("        kernel: %s", xid79)
	_ = d.kmsg["gpu-3"].write(3, xid79)
	took, ok, why = d.waitFor(ctx, "gpu-3 tainted", func() (bool, string) { return d.tainted(ctx, "gpu-3"), "not tainted yet" })
	if ok {
		n, _ := d.cs.CoreV1().Nodes().Get(ctx, "gpu-3", metav1.GetOptions{})
		d.say("        → gpu-3 tainted %s after %s (kernel line → exporter → collector → Loki → controller → taint)",
			taintText(n), took.Round(time.Millisecond))
		if ev, err := fault.ParseEvidence(n.Annotations[fault.AnnotationEvidence]); err == nil && len(ev) > 0 {
			d.say("          evidence (annotation %s): rule %s, %d line(s), first: %q", fault.AnnotationEvidence, ev[0].ID(),
				len(ev[0].Lines), clip(ev[0].Lines[0].Text, 100))
			d.check("Xid 79 on gpu-3 → tainted with the evidence on the node", strings.Contains(ev[0].Lines[0].Text, "79"), "")
		} else {
			d.check("Xid 79 on gpu-3 → tainted with the evidence on the node", false, fmt.Sprintf("evidence: %v", err))
		}
	} else {
		d.check("Xid 79 on gpu-3 → tainted", false, why)
	}

	d.step("Scenario 3/3: gpu-2's NIC flaps (link down/up three times in a minute)")
	d.say("        the demo's site pack turns link-flap into action: probe — confirm with a network probe before tainting")
	for i := 0; i < 3; i++ {
		_ = d.kmsg["gpu-2"].write(3, "mlx5_core 0000:18:00.0 ens1np0: Link down")
		_ = d.kmsg["gpu-2"].write(6, "mlx5_core 0000:18:00.0 ens1np0: Link up")
	}
	// The probe result of this rule (the nvml round left its own Event on every node).
	ruleResult := func() []corev1.Event {
		var out []corev1.Event
		for _, e := range append(d.events(ctx, "gpu-2", "ProbePassed"), d.events(ctx, "gpu-2", "ProbeFailed")...) {
			if strings.Contains(e.Message, "link-flap") {
				out = append(out, e)
			}
		}
		return out
	}
	took, ok, why = d.waitFor(ctx, "the probe result of link-flap on gpu-2", func() (bool, string) {
		return len(ruleResult()) > 0, "no probe result yet"
	})
	if ok {
		evs := ruleResult()
		d.say("        → the rule fired and asked for a probe; %s after %s: %s", evs[0].Reason, took.Round(time.Millisecond), clip(evs[0].Message, 200))
		passed := evs[0].Reason == "ProbePassed"
		decision := "the network probe passed: gpu-2 stays schedulable (a flap without lasting damage)"
		if !passed {
			decision = "the network probe failed: gpu-2 is tainted"
		}
		d.say("        → decision: %s", decision)
		// The decision follows the result at once; give the taint (if any) and the
		// health label a moment to show in the Node.
		d.waitFor(ctx, "gpu-2's health label", func() (bool, string) {
			n, err := d.cs.CoreV1().Nodes().Get(ctx, "gpu-2", metav1.GetOptions{})
			return err == nil && n.Labels["faultline.io/health"] != "TESTING", "still TESTING"
		})
		time.Sleep(500 * time.Millisecond)
		d.check("link flaps on gpu-2 → a confirming probe, then the decision", passed == !d.tainted(ctx, "gpu-2"),
			fmt.Sprintf("probe %s, tainted %v", evs[0].Reason, d.tainted(ctx, "gpu-2")))
	} else {
		d.check("link flaps on gpu-2 → a confirming probe", false, why)
	}

	d.step("What a user types in Grafana (Explore → Loki): {node=\"gpu-3\"} |= \"Xid\"")
	lines, err := d.logql(ctx, `{node="gpu-3"} |= "Xid"`)
	for _, l := range lines {
		d.say("        %s", l)
	}
	d.check("LogQL finds the Xid line in Loki", err == nil && len(lines) > 0 && strings.Contains(strings.Join(lines, "\n"), "Xid"), errText(err))

	d.step("Nodes, as kubectl would list them")
	d.nodeTable(ctx)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (d *demo) events(ctx context.Context, node, reason string) []corev1.Event {
	sel := fields.Set{"involvedObject.name": node, "reason": reason}.AsSelector().String()
	var out []corev1.Event
	for _, namespace := range []string{"default", ns} {
		l, err := d.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil {
			out = append(out, l.Items...)
		}
	}
	return out
}

func (d *demo) tainted(ctx context.Context, node string) bool {
	n, err := d.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "faultline.io/") {
			return true
		}
	}
	return false
}

func taintText(n *corev1.Node) string {
	var ts []string
	if n == nil {
		return ""
	}
	for _, t := range n.Spec.Taints {
		ts = append(ts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	if len(ts) == 0 {
		return "<none>"
	}
	return strings.Join(ts, ",")
}

// logql runs a LogQL query over the last hour, oldest line first.
func (d *demo) logql(ctx context.Context, query string) ([]string, error) {
	q := url.Values{"query": {query}, "start": {strconv.FormatInt(time.Now().Add(-time.Hour).UnixNano(), 10)},
		"end": {strconv.FormatInt(time.Now().Add(time.Minute).UnixNano(), 10)}, "limit": {"20"}, "direction": {"forward"}}
	var resp struct {
		Data struct {
			Result []struct {
				Stream map[string]string `json:"stream"`
				Values [][2]string       `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, d.env.LokiURL()+"/loki/api/v1/query_range?"+q.Encode(), &resp); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range resp.Data.Result {
		for _, v := range r.Values {
			ns, _ := strconv.ParseInt(v[0], 10, 64)
			out = append(out, fmt.Sprintf("%s {node=%q, source=%q} %s", time.Unix(0, ns).Format(time.TimeOnly), r.Stream["node"], r.Stream["source"], v[1]))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (d *demo) nodeTable(ctx context.Context) {
	list, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		d.say("        %v", err)
		return
	}
	w := bufio.NewWriter(d.out)
	fmt.Fprintf(w, "        %-8s %-10s %s\n", "NAME", "HEALTH", "TAINTS")
	for i := range list.Items {
		n := &list.Items[i]
		h := n.Labels["faultline.io/health"]
		if h == "" {
			h = "<none>"
		}
		fmt.Fprintf(w, "        %-8s %-10s %s\n", n.Name, h, taintText(n))
	}
	w.Flush()
}

func (d *demo) summary() error {
	d.step("Summary")
	failed := 0
	for _, r := range d.results {
		mark := "PASS"
		if !r.ok {
			mark = "FAIL"
			failed++
		}
		d.say("        %s  %s%s", mark, r.what, suffix(r.note))
	}
	if failed > 0 {
		return fmt.Errorf("demo: %d of %d outcomes did not hold (logs in %s)", failed, len(d.results), filepath.Join(d.o.Dir, "logs"))
	}
	d.say("        all %d outcomes held", len(d.results))
	return nil
}

// tryIt prints how to poke at the running stack.
func (d *demo) tryIt() {
	kubectl := testenv.Binary(d.tb, "kubectl")
	d.step("Everything keeps running until Ctrl-C. Try it by hand:")
	d.say(`
  export KUBECONFIG=%s
  %s get nodes -o custom-columns='NAME:.metadata.name,HEALTH:.metadata.labels.faultline\.io/health,TAINTS:.spec.taints[*].value'
  %s get events -A --field-selector involvedObject.kind=Node
  %s get node gpu-3 -o jsonpath='{.metadata.annotations.faultline\.io/evidence}'

  curl -s %s/api/v1/faults                       # active faults, held faults, budget
  %s probe run --controller %s --node gpu-0,gpu-1 --check nvml --wait
  curl -s '%s/status?check=nvml&host=gpu-0'      # Autopilot-style
  %s untaint --controller %s gpu-3

  Loki (Grafana data source or logcli): %s
    {source="kernel"} |~ "Xid|SXid|AER|Link down"
  Write your own kernel line on gpu-4, as the kernel would (priority, sequence, µs since boot):
    f=%s; echo "3,$(( $(wc -l < $f) + 1 )),$(awk '{printf "%%.0f", $1*1000000}' /proc/uptime),-;NVRM: Xid (PCI:0000:07:00): 48, pid=1, name=x, An uncorrectable double bit error" >> $f

  Logs of every component: %s`,
		d.env.Kubeconfig(), kubectl, kubectl, kubectl,
		d.api, d.o.Binary, d.api, d.api, d.o.Binary, d.api, d.env.LokiURL(),
		d.kmsg["gpu-4"].path, filepath.Join(d.o.Dir, "logs"))
}

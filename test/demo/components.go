package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/dmesg-exporter/kmsg"
	"github.com/faultline-dev/faultline/test/testenv"
)

// agents starts one probe agent per node, each as the agent's ServiceAccount with a
// token bound to a pod on its node (as the chart's DaemonSet runs it; the agents'
// admission policy lets it write only its own node), with its node's simulated
// kubelet, and returns their URLs by node.
func (d *demo) agents(ctx context.Context) map[string]string {
	logw, err := os.Create(filepath.Join(d.o.Dir, "logs", "probe-agents.log"))
	if err != nil {
		d.tb.Fatal(err)
	}
	d.tb.Cleanup(func() { logw.Close() })
	fakes := testenv.BuildFakeGPUPrograms(d.tb)
	urls := map[string]string{}
	for _, n := range d.nodes {
		// pciebw's stand-in prints what cuda/pciebw prints for the node's GPUs: 12 GB/s
		// each, but GPU 3 of the busy node at 2 GB/s (its link is damaged).
		slow := 12.0
		if n == busyNode {
			slow = 2.0
		}
		pciebw, err := pciebwStandIn(filepath.Join(d.o.Dir, "nodes", n), filepath.Join(fakes, "pciebw"), slow)
		if err != nil {
			d.tb.Fatalf("agent %s: %v", n, err)
		}
		commands := map[string]string{"ping": testenv.Binary(d.tb, "ping"), "iperf3": testenv.Binary(d.tb, "iperf3"), "pciebw": pciebw}
		client, err := kubernetes.NewForConfig(d.tokenConfig(d.tokens[n].agentAPI))
		if err != nil {
			d.tb.Fatal(err)
		}
		u, stop, err := startAgent(ctx, n, d.machines[n], agentSetup{client: client, commands: commands, otlp: d.env.OTLPEndpoint(),
			lineToken: d.tokens[n].agentLines, certDir: filepath.Join(d.o.Dir, "nodes", n, "pki"), log: logw})
		if err != nil {
			d.tb.Fatalf("agent %s: %v", n, err)
		}
		d.tb.Cleanup(stop)
		urls[n] = u
	}
	d.say("        %d agents on %s … (API authenticated with TokenReview + SubjectAccessReview; each asks its node's kubelet which pods hold GPUs,", len(urls), urls[d.nodes[0]])
	d.say("        and ships the verdict of every check it runs as a source=\"probe\" line through the collector)")
	return urls
}

// pciebwStandIn writes, in dir, the output cuda/pciebw prints for eight A100s (GPU 3
// at gbps, the others at 12 GB/s) and a script that runs the project's stand-in for
// pciebw on it, and returns the script.
func pciebwStandIn(dir, fake string, gbps float64) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		bw := 12.0
		if i == 3 {
			bw = gbps
		}
		fmt.Fprintf(&b, `{"gpu":%d,"pci":"0000:%02x:00.0","name":"NVIDIA A100-SXM4-80GB","h2d_gbps":%.2f,"d2h_gbps":%.2f,"bytes":268435456,"iters":20}`+"\n",
			i, 0x07+i*8, bw, bw-0.1)
	}
	out := filepath.Join(dir, "pciebw.jsonl")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	script := filepath.Join(dir, "pciebw")
	return script, os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\nFAULTLINE_FAKE_OUTPUT_PCIEBW=%s exec %s \"$@\"\n", out, fake)), 0o755)
}

// exporters starts one dmesg-exporter process per node, each reading its own
// kmsg-format file after a clean boot's lines.
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
			"--state-file", filepath.Join(dir, "state.json"), "--otlp-endpoint", d.env.OTLPEndpoint(), "--token-file", d.tokens[n].exporter,
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

// nvmlEvery is how often the controller runs the nvml check on every node (hourly by
// default): its verdict lines take out a node that lost a GPU (scenario 7).
const nvmlEvery = "1m"

// controller starts the controller process with its ServiceAccount's kubeconfig, the
// built-in packs plus the demo's, and the agents, and waits (up to a step's timeout)
// until it leads.
func (d *demo) controller(ctx context.Context, token string, agents map[string]string) {
	packs := filepath.Join(d.o.Dir, "packs")
	if err := os.MkdirAll(packs, 0o755); err != nil {
		d.tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(packs, "demo.yaml"), demoPack, 0o644); err != nil {
		d.tb.Fatal(err)
	}
	kubeconfig := d.kubeconfigFor(token, "faultline-controller")
	caCert, caKey := d.signer()
	port := testenv.FreePorts(d.tb, 1)[0]
	d.api = fmt.Sprintf("http://127.0.0.1:%d", port)
	var pairs []string
	for _, n := range d.nodes {
		pairs = append(pairs, n+"="+agents[n])
	}
	d.process("controller", d.o.Binary, "controller", "--kubeconfig", kubeconfig, "--namespace", ns,
		"--identity", "faultline-controller-demo", "--loki-url", d.env.LokiURL(), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--packs", packs, "--budget-percent", "60", "--reconcile-interval", "2s", "--initial-lookback", "10m",
		"--probe-schedule", "nvml="+nvmlEvery, "--probe-idle-retry-interval", "2s",
		"--probe-agent", strings.Join(pairs, ","), "--probe-token-file", d.probeToken, "--log-format", "text",
		// The agents' per-node certificates: the controller approves and signs each
		// agent's request for its own node, and checks the node's name when it calls.
		"--probe-agent-ca-file", caCert, "--probe-agent-node-certs", "--probe-agent-signer-cert-file", caCert,
		"--probe-agent-signer-key-file", caKey, "--probe-agent-service-account", agentSA)
	d.waitFor(ctx, "the controller to lead", func() (bool, string) {
		// Its metrics say whether it leads (the Lease names it too).
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.api+"/metrics", nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(b), "\nfaultline_controller_leader 1\n"), "not leading yet"
	})
	d.say("        controller %s (metrics, health), leading; it tails Loki with LogQL built from the packs", d.api)
	took, ok, why := d.waitFor(ctx, "the agents' certificates", func() (bool, string) {
		for _, n := range d.nodes {
			if d.machines[n].cert.Current() == nil {
				return false, n + " has none yet"
			}
		}
		return true, ""
	})
	if ok {
		d.say("        every agent serves a certificate of its own node (%s), requested through the CSR API and signed by the controller in %s",
			agentapi.NodeCertName("gpu-0"), took.Round(time.Millisecond))
	}
	d.check("each agent got a certificate for its own node (CSR API, signed by the controller)", ok, why)
}

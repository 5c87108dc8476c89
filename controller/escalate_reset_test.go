package controller_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// resetPack: a repeated Xid resets the GPU its line names, then the rule's
// confirming probe (pciebw) runs again; another rule goes to service when it fires
// again after a reboot.
const resetPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  defaults: {source: kernel, severity: critical, action: taint}
  rules:
    - id: reset-xid
      match: {regex: 'reset-check: Xid \(PCI:(?P<pci>[0-9a-f]+:[0-9a-f]{2}:[0-9a-f]{2})\): 79'}
      probe: {checks: [pciebw]}
      escalate:
        - {action: gpu-reset, repeat: {count: 1, window: 1h}}
    - id: reboot-xid
      match: {regex: 'reboot-check: GPU has fallen off the bus'}
      escalate:
        - {action: service, reboots: 1}
`

const resetLine = "reset-check: Xid (PCI:0000:3b:00): 79"

// fakeGPUNode writes what a node with two GPUs shows: a sysfs tree with their PCI
// functions (gen4 x16 links), the pciebw output for both (about 24.5 GB/s, a pass)
// and nvidia-smi's answer to a reset; it returns the sysfs root and the fakes'
// environment, whose FAULTLINE_FAKE_ARGS file collects the programs' argv.
func fakeGPUNode(t *testing.T) (sysfs string, env []string, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	sysfs = filepath.Join(dir, "sys")
	var bw strings.Builder
	for i, pci := range []string{"0000:3b:00.0", "0000:86:00.0"} {
		dev := filepath.Join(sysfs, "bus", "pci", "devices", pci)
		if err := os.MkdirAll(dev, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"vendor": "0x10de", "class": "0x030200", "max_link_speed": "16.0 GT/s PCIe",
			"current_link_speed": "16.0 GT/s PCIe", "max_link_width": "16", "current_link_width": "16"} {
			if err := os.WriteFile(filepath.Join(dev, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&bw, `{"gpu":%d,"pci":%q,"name":"NVIDIA A100-SXM4-80GB","h2d_gbps":24.5,"d2h_gbps":24.4,"bytes":268435456,"iters":20}`+"\n", i, pci)
	}
	pciebw := filepath.Join(dir, "pciebw.jsonl")
	if err := os.WriteFile(pciebw, []byte(bw.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	argsFile = filepath.Join(dir, "argv")
	env = []string{"FAULTLINE_FAKE_OUTPUT_PCIEBW=" + pciebw, "FAULTLINE_FAKE_ARGS=" + argsFile,
		"FAULTLINE_FAKE_OUTPUT_NVIDIA_SMI=" + filepath.Join(root, "active-probes/checks/testdata/recorded/nvidia-smi/reset-ok.txt")}
	return sysfs, env, argsFile
}

// argv reads the programs a node's fakes ran, one argument vector a line.
func argv(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a []string
		if json.Unmarshal([]byte(l), &a) == nil {
			out = append(out, strings.Join(a, " "))
		}
	}
	return out
}

// TestGPUResetStep, with the real apiserver, Loki and a probe-agent process per
// node: a repeated Xid reaches the gpu-reset step, the node's agent runs (the fake)
// nvidia-smi for the GPU the line names under the probing taint, the rule's
// confirming probe runs again, and the NodeFault records both; on a node where a
// pod holds a GPU the agent refuses (409) and the step waits, until the pod is gone.
func TestGPUResetStep(t *testing.T) {
	cl := newCluster(t, "gpu-a", "gpu-b")
	bin := testenv.BuildProbeAgent(t)
	fakes := testenv.BuildFakeGPUPrograms(t)
	agents := map[string]string{}
	argsOf := map[string]string{}
	kubelets := map[string]*testenv.PodResources{}
	for _, node := range []string{"gpu-a", "gpu-b"} {
		sysfs, env, args := fakeGPUNode(t)
		kubelets[node] = testenv.StartPodResources(t)
		agents[node] = startAgentEnv(t, bin, cl.env.Kubeconfig(), node, fakes, env, "--command", "nvidia-smi="+filepath.Join(fakes, "nvidia-smi"),
			"--sysfs-root", sysfs, "--pod-resources-socket="+kubelets[node].Socket)
		argsOf[node] = args
	}
	kubelets["gpu-b"].SetPods(testenv.PodWithDevices("training", "llm-0", map[string][]string{"nvidia.com/gpu": {"GPU-5d7c"}}, nil))
	cl.bindProbeRunner()
	token := cl.env.ServiceAccountToken(t, ns, "faultline-controller")
	pc := (&probeSetup{agents: agents, token: token}).probeConfig()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(resetPack), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cl.start(options{packs: []string{dir}, decide: decide.Config{MaxPercent: 100, DisableStorm: true}, probes: pc})

	cl.push("gpu-a", time.Now(), resetLine)
	cl.push("gpu-b", time.Now(), resetLine)
	cl.waitFor("gpu-a and gpu-b tainted", 30*time.Second, func() bool { return cl.tainted("gpu-a") && cl.tainted("gpu-b") })
	if got := argv(t, argsOf["gpu-a"]); len(got) != 0 {
		t.Fatalf("programs ran before the ladder's step: %q", got)
	}
	cl.push("gpu-a", time.Now(), resetLine)
	cl.push("gpu-b", time.Now(), resetLine)

	cl.waitFor("gpu-a's gpu-reset step done", 60*time.Second, func() bool {
		e := cl.escalation("gpu-a", "reset-xid")
		return e.Step == 1 && e.State == v1alpha1.StepDone
	})
	e := cl.escalation("gpu-a", "reset-xid")
	if e.Action != "gpu-reset" || !strings.Contains(e.Message, "1 GPU(s) reset") || !strings.Contains(e.Message, "confirming probes pciebw passed") {
		t.Errorf("gpu-a's gpu-reset step: %+v", e)
	}
	// The agent reset the GPU the line names, then ran the confirming probe.
	if got := argv(t, argsOf["gpu-a"]); len(got) != 2 || got[0] != "nvidia-smi --gpu-reset -i 0000:3b:00.0" || !strings.HasPrefix(got[1], "pciebw ") {
		t.Errorf("gpu-a's programs: %q", got)
	}
	nf, err := cl.record("gpu-a", "site", "reset-xid")
	if err != nil {
		t.Fatal(err)
	}
	var confirm *v1alpha1.ProbeVerdict
	for i := range nf.Status.Probes {
		if p := &nf.Status.Probes[i]; p.Purpose == "confirm" && strings.HasPrefix(p.Message, "after gpu-reset") {
			confirm = p
		}
	}
	if confirm == nil || confirm.Verdict != "passed" || strings.Join(confirm.Checks, ",") != "pciebw" {
		t.Errorf("gpu-a's record lacks the confirming verdict after the reset: %+v", nf.Status.Probes)
	}
	if hasProbingTaint(cl, "gpu-a") {
		t.Error("gpu-a's probing taint outlived the reset")
	}
	for _, check := range []string{"gpu-reset", "pciebw"} {
		if n := testutil.ToFloat64(r.m.ProbeResults().WithLabelValues(check, "pass", "escalation")); n != 1 {
			t.Errorf("%s passes counted for the escalation: %v, want 1", check, n)
		}
	}

	// gpu-b: a pod holds a GPU; the agent refuses, the step waits and runs nothing.
	cl.waitFor("gpu-b's gpu-reset step waits", 60*time.Second, func() bool {
		e := cl.escalation("gpu-b", "reset-xid")
		return e.Step == 1 && e.State == v1alpha1.StepWaiting
	})
	if e := cl.escalation("gpu-b", "reset-xid"); !strings.Contains(e.Message, "training/llm-0") || !strings.Contains(e.Message, "GPUs are busy") {
		t.Errorf("gpu-b's waiting step: %+v", e)
	}
	if got := argv(t, argsOf["gpu-b"]); len(got) != 0 {
		t.Errorf("programs ran on gpu-b while a pod holds its GPU: %q", got)
	}
	// The pod ended: the reconcile loop tries again and the reset goes through.
	kubelets["gpu-b"].SetPods()
	cl.waitFor("gpu-b's gpu-reset step done once its GPU is free", 60*time.Second, func() bool {
		e := cl.escalation("gpu-b", "reset-xid")
		return e.Step == 1 && e.State == v1alpha1.StepDone
	})
	if got := argv(t, argsOf["gpu-b"]); len(got) != 2 || got[0] != "nvidia-smi --gpu-reset -i 0000:3b:00.0" {
		t.Errorf("gpu-b's programs: %q", got)
	}
}

func hasProbingTaint(cl *cluster, node string) bool {
	for _, tn := range cl.node(node).Spec.Taints {
		if tn.Key == "faultline.io/probing" {
			return true
		}
	}
	return false
}

// pushBoot sends kernel lines with the boot id the dmesg-exporter attaches to each
// entry as structured metadata (logstream.MetaBootID).
func (cl *cluster) pushBoot(node, boot string, at time.Time, lines ...string) {
	cl.t.Helper()
	var entries []push.Entry
	for i, l := range lines {
		entries = append(entries, push.Entry{Timestamp: at.Add(time.Duration(i) * time.Microsecond), Line: l,
			StructuredMetadata: push.LabelsAdapter{{Name: logstream.MetaBootID, Value: boot}}})
	}
	if err := testenv.PushLoki(cl.loki, []push.Stream{{Labels: fmt.Sprintf(`{node=%q, source="kernel"}`, node), Entries: entries}}); err != nil {
		cl.t.Fatal(err)
	}
}

// TestRebootsTrigger, with the real apiserver and Loki: the lines carry the boot id
// as the exporter ships it; a rule with `reboots: 1` records a second firing in the
// same boot without climbing, and climbs once it fires in the next boot.
func TestRebootsTrigger(t *testing.T) {
	cl := newCluster(t, "gpu-r")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(resetPack), 0o644); err != nil {
		t.Fatal(err)
	}
	cl.start(options{packs: []string{dir}, decide: decide.Config{MaxPercent: 100, DisableStorm: true}})
	const line = "reboot-check: GPU has fallen off the bus"
	firings := func() []v1alpha1.Firing {
		nf, err := cl.record("gpu-r", "site", "reboot-xid")
		if err != nil || nf.Status.Escalation == nil {
			return nil
		}
		return nf.Status.Escalation.Firings
	}
	cl.pushBoot("gpu-r", "boot-1", time.Now(), line)
	cl.waitFor("gpu-r tainted", 30*time.Second, func() bool { return cl.tainted("gpu-r") })
	cl.pushBoot("gpu-r", "boot-1", time.Now(), line)
	eventually.NoError(t, 30*time.Second, "the second firing of boot-1 recorded", func() error {
		if f := firings(); len(f) != 2 || f[1].BootID != "boot-1" {
			return fmt.Errorf("firings %+v", f)
		}
		return nil
	})
	if e := cl.escalation("gpu-r", "reboot-xid"); e.Step != 0 {
		t.Fatalf("climbed without a reboot: %+v", e)
	}
	cl.pushBoot("gpu-r", "boot-2", time.Now(), line)
	cl.waitFor("the firing after the reboot reaches the service step", 30*time.Second, func() bool {
		e := cl.escalation("gpu-r", "reboot-xid")
		return e.Step == 1 && e.State == v1alpha1.StepDone
	})
	e := cl.escalation("gpu-r", "reboot-xid")
	if e.Action != "service" || !strings.Contains(e.Reason, "reboot") {
		t.Errorf("the reboots step: %+v", e)
	}
	if f := firings(); len(f) != 3 || f[2].BootID != "boot-2" {
		t.Errorf("firings %+v", f)
	}
}

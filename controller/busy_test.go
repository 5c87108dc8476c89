package controller_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// busyPack: rules of a site for busy nodes, each on a line of its own: the harmless
// check fails (dcgm level 1), whileBusy wait and ignore, and a taint whose recovery
// probe is invasive (its own taint key, apart from the others').
const busyPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: busy}
spec:
  defaults: {severity: critical, action: probe, source: kernel}
  rules:
    - id: harmless-fails
      match: {regex: 'BUSYTEST dcgm'}
      probe: {checks: [dcgm, pciebw]}
    - id: wait
      match: {regex: 'BUSYTEST wait'}
      probe: {checks: [nvml, pciebw], whileBusy: wait}
    - id: ignore
      match: {regex: 'BUSYTEST ignore'}
      probe: {checks: [nvml, pciebw], whileBusy: ignore}
    - id: recover
      match: {regex: 'BUSYTEST recover'}
      action: taint
      taint: {key: faultline.io/recover-test}
      recover: {probes: [pciebw]}
`

// busyNode is a node whose kubelet reports a pod holding a GPU, with its agent and
// the programs the agent's fakes ran.
type busyNode struct {
	kubelet *testenv.PodResources
	args    string
}

// ran lists the fake programs that ran on the node (their names).
func (b busyNode) ran(t *testing.T) []string {
	var out []string
	for _, l := range argv(t, b.args) {
		out = append(out, strings.Fields(l)[0])
	}
	return out
}

// TestBusyNode, with the real apiserver, Loki and a probe agent per node whose
// kubelet reports a pod holding a GPU: a PCIe AER line asks for [pciebw, nvml];
// nvml runs at once, pciebw is refused, the node gets the unconfirmed taint and the
// fault waits (AwaitingIdle) and counts in the rule's budget; once the pod ends,
// pciebw runs: on gpu-a (a slow GPU) it fails and the taint is confirmed, on gpu-b it
// passes and the taint goes (Resolved). A failing harmless check taints at once;
// whileBusy wait places no taint, ignore reaches no verdict; a recovery probe waits
// for idle GPUs in phase Recovering and runs when the node drains.
func TestBusyNode(t *testing.T) {
	nodes := []string{"gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"}
	cl := newCluster(t, nodes...)
	bin := testenv.BuildProbeAgent(t)
	fakes := testenv.BuildFakeGPUPrograms(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dcgmFail := filepath.Join(root, "active-probes/checks/testdata/recorded/dcgmi/v3-level1-rowremap-fail.json")
	dir := t.TempDir()
	agents := map[string]string{}
	busy := map[string]busyNode{}
	for _, node := range nodes {
		bw := 12.0
		if node == "gpu-a" {
			bw = 2.0
		}
		b := busyNode{kubelet: testenv.StartPodResources(t), args: filepath.Join(dir, node+".argv")}
		b.kubelet.SetPods(testenv.PodWithDevices("training", "llm-"+node, map[string][]string{"nvidia.com/gpu": {"GPU-5d7c"}}, nil))
		env := []string{"FAULTLINE_FAKE_OUTPUT_PCIEBW=" + pciebwOutput(t, filepath.Join(dir, node+".jsonl"), bw),
			"FAULTLINE_FAKE_OUTPUT_DCGMI=" + dcgmFail, "FAULTLINE_FAKE_ARGS=" + b.args}
		agents[node] = startAgentEnv(t, bin, cl.env.Kubeconfig(), node, fakes, env, "--command", "dcgmi="+filepath.Join(fakes, "dcgmi"),
			"--pod-resources-socket="+b.kubelet.Socket)
		busy[node] = b
	}
	cl.bindProbeRunner()
	pc := (&probeSetup{agents: agents, token: cl.env.ServiceAccountToken(t, ns, "faultline-controller")}).probeConfig()
	pc.IdleEvery = 300 * time.Millisecond
	if err := os.WriteFile(filepath.Join(dir, "busy.yaml"), []byte(busyPack), 0o644); err != nil {
		t.Fatal(err)
	}
	aerKey := "pcie-aer/" + aerRule
	cl.start(options{packs: []string{dir}, probes: pc,
		decide: decide.Config{MaxPercent: 100, DisableStorm: true, RuleBudgets: map[string]int{aerKey: 2}}})

	taintOf := func(node, key string) string {
		for _, tn := range cl.node(node).Spec.Taints {
			if tn.Key == key && tn.Effect == corev1.TaintEffectNoSchedule {
				return tn.Value
			}
		}
		return ""
	}
	// awaiting: the fault waits for idle GPUs, its record naming the pod, with the
	// harmless check's verdict.
	awaiting := func(node, pack, rule string) error {
		nf, err := cl.record(node, pack, rule)
		if err != nil {
			return err
		}
		st := nf.Status
		if st.Phase != v1alpha1.PhaseAwaitingIdle || st.Reason != trigger.ReasonWaitingForIdleGPUs ||
			!strings.Contains(st.Message, "training/llm-"+node) || !strings.Contains(st.Message, "pciebw") {
			return fmt.Errorf("%s's record: phase %s (%s: %s)", node, st.Phase, st.Reason, st.Message)
		}
		if len(st.Probes) == 0 || st.Probes[len(st.Probes)-1].Verdict != "awaiting-idle" || !strings.Contains(st.Probes[len(st.Probes)-1].Message, "nvml") {
			return fmt.Errorf("%s's verdicts: %+v", node, st.Probes)
		}
		return nil
	}

	// Stage one: nvml at once, pciebw refused; the unconfirmed taint and AwaitingIdle.
	cl.push("gpu-a", time.Now(), aerNonFatal)
	cl.push("gpu-b", time.Now(), aerNonFatal)
	for _, node := range []string{"gpu-a", "gpu-b"} {
		cl.waitFor(node+" carries the unconfirmed taint", 60*time.Second, func() bool {
			return taintOf(node, "faultline.io/faulty") == v1alpha1.UnconfirmedTaintValue
		})
		eventually.NoError(t, 20*time.Second, node+"'s fault waits for idle GPUs", func() error { return awaiting(node, "pcie-aer", aerRule) })
		if got := busy[node].ran(t); slices.Contains(got, "pciebw") {
			t.Fatalf("pciebw ran on %s while a pod holds its GPU: %q", node, got)
		}
	}
	// The unconfirmed taints count in the rule's budget: a third node is held.
	cl.push("gpu-e", time.Now(), aerNonFatal)
	eventually.NoError(t, 30*time.Second, "gpu-e's fault held by the rule's budget", func() error {
		nf, err := cl.record("gpu-e", "pcie-aer", aerRule)
		if err != nil {
			return err
		}
		if nf.Status.Phase != v1alpha1.PhaseHeld || nf.Status.Reason != string(decide.ReasonRuleBudget) {
			return fmt.Errorf("gpu-e's record: phase %s (%s: %s)", nf.Status.Phase, nf.Status.Reason, nf.Status.Message)
		}
		return nil
	})

	// A harmless check that fails taints at once, with the rule's own value.
	cl.push("gpu-c", time.Now(), "BUSYTEST dcgm")
	cl.waitFor("gpu-c tainted at once by its failing dcgm", 60*time.Second, func() bool {
		return taintOf("gpu-c", "faultline.io/faulty") == "harmless-fails" && cl.phase("gpu-c", "busy", "harmless-fails") == v1alpha1.PhaseTainted
	})
	if got := busy["gpu-c"].ran(t); !slices.Contains(got, "dcgmi") || slices.Contains(got, "pciebw") {
		t.Errorf("gpu-c's programs: %q (want dcgmi, no pciebw)", got)
	}

	// whileBusy wait: AwaitingIdle with no taint; ignore: no verdict, onTimeout ignore.
	cl.push("gpu-d", time.Now(), "BUSYTEST wait")
	cl.push("gpu-d", time.Now().Add(time.Millisecond), "BUSYTEST ignore")
	eventually.NoError(t, 60*time.Second, "gpu-d's wait fault waits, untainted", func() error { return awaiting("gpu-d", "busy", "wait") })
	// Resolved without a verdict whether the refused check's answer comes back or the
	// confirmation times out (a minute here): both are "no verdict" for ignore.
	eventually.NoError(t, 90*time.Second, "gpu-d's ignore fault resolved without a verdict", func() error {
		nf, err := cl.record("gpu-d", "busy", "ignore")
		if err != nil {
			return err
		}
		if nf.Status.Phase != v1alpha1.PhaseResolved || nf.Status.Reason != trigger.ReasonProbeTimedOut {
			return fmt.Errorf("gpu-d's ignore record: phase %s (%s: %s)", nf.Status.Phase, nf.Status.Reason, nf.Status.Message)
		}
		return nil
	})
	if v := taintOf("gpu-d", "faultline.io/faulty"); v != "" {
		t.Errorf("gpu-d carries faultline.io/faulty=%s (whileBusy wait and ignore place none)", v)
	}

	// A recovery probe that needs idle GPUs waits for them, in phase Recovering.
	cl.push("gpu-d", time.Now(), "BUSYTEST recover")
	cl.waitFor("gpu-d tainted by the recover rule", 30*time.Second, func() bool { return taintOf("gpu-d", "faultline.io/recover-test") != "" })
	eventually.NoError(t, 30*time.Second, "gpu-d's recovery waits for idle GPUs", func() error {
		nf, err := cl.record("gpu-d", "busy", "recover")
		if err != nil {
			return err
		}
		if st := nf.Status; st.Phase != v1alpha1.PhaseRecovering || st.Reason != trigger.ReasonWaitingForIdleGPUs || !strings.Contains(st.Message, "training/llm-gpu-d") {
			return fmt.Errorf("gpu-d's recover record: phase %s (%s: %s)", st.Phase, st.Reason, st.Message)
		}
		return nil
	})
	if got := busy["gpu-d"].ran(t); slices.Contains(got, "pciebw") {
		t.Fatalf("pciebw ran on gpu-d while a pod holds its GPU: %q", got)
	}

	// The pods end: pciebw runs. gpu-a's fails: the rule's own taint, Tainted.
	busy["gpu-a"].kubelet.SetPods()
	cl.waitFor("gpu-a's taint confirmed", 60*time.Second, func() bool {
		return taintOf("gpu-a", "faultline.io/faulty") == aerRule && cl.phase("gpu-a", "pcie-aer", aerRule) == v1alpha1.PhaseTainted
	})
	// gpu-b's passes: the unconfirmed taint goes, the fault is over.
	busy["gpu-b"].kubelet.SetPods()
	cl.waitFor("gpu-b untainted", 60*time.Second, func() bool { return !cl.tainted("gpu-b") })
	eventually.NoError(t, 20*time.Second, "gpu-b's fault Resolved (ProbePassed)", func() error {
		nf, err := cl.record("gpu-b", "pcie-aer", aerRule)
		if err != nil {
			return err
		}
		if nf.Status.Phase != v1alpha1.PhaseResolved || nf.Status.Reason != trigger.ReasonProbePassed || nf.Status.Taint != nil {
			return fmt.Errorf("gpu-b's record: phase %s (%s: %s), taint %+v", nf.Status.Phase, nf.Status.Reason, nf.Status.Message, nf.Status.Taint)
		}
		return nil
	})
	// gpu-d drains: the wait fault's pciebw passes (never tainted), the recovery
	// probe passes and its taint goes.
	busy["gpu-d"].kubelet.SetPods()
	cl.waitFor("gpu-d's recovery done", 60*time.Second, func() bool {
		return taintOf("gpu-d", "faultline.io/recover-test") == "" && cl.phase("gpu-d", "busy", "recover") == v1alpha1.PhaseResolved
	})
	eventually.NoError(t, 30*time.Second, "gpu-d's wait fault Resolved (ProbePassed)", func() error {
		nf, err := cl.record("gpu-d", "busy", "wait")
		if err != nil {
			return err
		}
		if nf.Status.Phase != v1alpha1.PhaseResolved || nf.Status.Reason != trigger.ReasonProbePassed {
			return fmt.Errorf("gpu-d's wait record: phase %s (%s: %s)", nf.Status.Phase, nf.Status.Reason, nf.Status.Message)
		}
		return nil
	})
	if v := taintOf("gpu-d", "faultline.io/faulty"); v != "" {
		t.Errorf("gpu-d carries faultline.io/faulty=%s", v)
	}
}

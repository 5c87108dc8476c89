package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestScheduledCheckFailureTaints: a failing scheduled check takes the node out.
// Both nodes have eight GPUs of capacity, so the scheduled nvml check expects eight;
// the real agents read a stand-in NVML library that shows gpu-a seven GPUs and
// gpu-b eight (none of which it can open). Each agent ships the verdict of its run
// as a source="probe" line to Loki; the controller reads it like any other line and
// the default probe-verdicts rule taints gpu-a, with the verdict line as evidence.
// gpu-b's check errs (it cannot open its GPUs) without failing: no rule fires.
func TestScheduledCheckFailureTaints(t *testing.T) {
	cl := newClusterWith(t, testenv.Options{Kubernetes: true, Loki: true}, "gpu-a", "gpu-b", "gpu-c", "gpu-d")
	ctx := context.Background()
	for _, name := range []string{"gpu-a", "gpu-b"} {
		n := cl.node(name)
		n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		if _, err := cl.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bin, fakes, lib := testenv.BuildProbeAgent(t), testenv.BuildFakeGPUPrograms(t), testenv.BuildFakeNVML(t)
	agents := map[string]string{}
	for node, gpus := range map[string]string{"gpu-a": "7", "gpu-b": "8"} {
		agents[node] = startAgentEnv(t, bin, cl.env.Kubeconfig(), node, fakes, []string{"FAULTLINE_FAKE_NVML_GPUS=" + gpus},
			"--pod-resources-socket="+testenv.StartPodResources(t).Socket, "--nvml-library="+lib, "--events-loki-url="+cl.loki)
	}
	tok := cl.env.ServiceAccountToken(t, ns, "faultline-controller")
	cl.bindProbeRunner()
	pc := trigger.Config{AgentURLs: agents, Token: func() (string, error) { return tok, nil },
		Schedules: []trigger.Schedule{{Check: "nvml", Every: 500 * time.Millisecond}}}
	cl.start(options{probes: pc, decide: decide.Config{MaxPercent: 50}})

	cl.waitFor("gpu-a tainted by its scheduled check's verdict", 60*time.Second, func() bool { return cl.tainted("gpu-a") })
	var nf *v1alpha1.NodeFault
	eventually.NoError(t, 20*time.Second, "gpu-a's NodeFault records its taint", func() error {
		var err error
		nf, err = cl.record("gpu-a", "probe-verdicts", "probe-gpus-missing")
		if err != nil || nf.Status.Taint == nil || nf.Status.Taint.State != v1alpha1.TaintPlaced {
			return fmt.Errorf("gpu-a's NodeFault: %+v %v", nf, err)
		}
		return nil
	})
	if len(nf.Status.Evidence) == 0 {
		t.Fatalf("gpu-a's NodeFault has no evidence: %+v", nf.Status)
	}
	ev := nf.Status.Evidence[len(nf.Status.Evidence)-1].Text
	for _, want := range []string{"faultline-probe: check=nvml status=fail trigger=schedule ", " gpu_count=7 gpus_expected=8 ", `message="found 7 GPUs, expected 8`} {
		if !strings.Contains(ev, want) {
			t.Errorf("gpu-a's evidence %q lacks %q", ev, want)
		}
	}
	// gpu-b's verdict lines reached Loki too, as its node's, with the level of a check
	// that could not reach a verdict; they decide nothing.
	for _, e := range testenv.WaitLoki(t, cl.loki, `{source="probe", node="gpu-b"}`, 1, 20*time.Second) {
		if !strings.HasPrefix(e.Line, "faultline-probe: check=nvml status=error trigger=schedule ") || e.Metadata["level"] != "warn" {
			t.Errorf("gpu-b's verdict line %q %v", e.Line, e.Metadata)
		}
	}
	if cl.tainted("gpu-b") {
		t.Error("gpu-b tainted although its check did not fail")
	}
}

package controller_test

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/autopilot"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/test/testenv"
)

// IBM Autopilot compatibility against the real apiserver and two real agents
// (fake GPU programs, the real iperf3): Autopilot's check names run faultline's
// checks and report under the name asked for; autopilot.ibm.com/gpuhealth says
// PASS, WARN, EVICT while a confirmed fault's taint is on the node, and TESTING
// while the periodic deep checks run; their dcgm level 3 result is written as
// Autopilot writes it; a node whose GPUs a pod holds is skipped by the deep checks,
// never forced.
func TestAutopilotCompat(t *testing.T) {
	cl := newClusterWith(t, testenv.Options{Kubernetes: true, Loki: true}, "gpu-a", "gpu-b", "gpu-c", "gpu-d")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	recorded := filepath.Join(root, "active-probes", "checks", "testdata", "recorded")
	bin, fakes, dir := testenv.BuildProbeAgent(t), testenv.BuildFakeGPUPrograms(t), t.TempDir()
	kubelets := map[string]*testenv.PodResources{}
	outputs := map[string]string{}
	agents := map[string]string{}
	for _, node := range []string{"gpu-a", "gpu-b"} {
		kubelets[node] = testenv.StartPodResources(t)
		outputs[node] = pciebwOutput(t, filepath.Join(dir, node+".jsonl"), 2.0) // GPU 3 slow: pciebw fails
		env := []string{"FAULTLINE_FAKE_OUTPUT_PCIEBW=" + outputs[node],
			"FAULTLINE_FAKE_OUTPUT_DGEMM=" + filepath.Join(recorded, "dgemm", "dgxa100-pass.jsonl"),
			// DCGM finds a memory fault on GPU 3 (the level does not change the capture).
			"FAULTLINE_FAKE_OUTPUT_DCGMI=" + filepath.Join(recorded, "dcgmi", "v4-level2-memory-fail.json"),
			// Each program takes a while, so that a deep check is seen running.
			"FAULTLINE_FAKE_SLEEP=400ms"}
		agents[node] = startAgentEnv(t, bin, cl.env.Kubeconfig(), node, fakes, env,
			"--pod-resources-socket="+kubelets[node].Socket, "--command", "dcgmi="+filepath.Join(fakes, "dcgmi"),
			"--command", "iperf3="+testenv.Binary(t, "iperf3"), "--command", "ping="+testenv.Binary(t, "ping"))
	}
	tok := cl.env.ServiceAccountToken(t, ns, "faultline-controller")
	cl.bindProbeRunner()
	for _, n := range []string{"gpu-a", "gpu-b"} {
		cl.setLabel(n, "example.com/agent", "yes")
	}
	sel, err := labels.Parse("example.com/agent=yes")
	if err != nil {
		t.Fatal(err)
	}
	config := func(deep time.Duration) trigger.Config {
		return trigger.Config{AgentURLs: agents, Token: func() (string, error) { return tok, nil }, NodeSelector: sel,
			ConfirmTimeout: time.Minute, Autopilot: &trigger.Autopilot{DeepEvery: deep}}
	}
	gpuhealth := func(node string) string { return cl.label(node, autopilot.LabelGPUHealth) }

	t.Run("NamesLabelsEvict", func(t *testing.T) {
		r := cl.start(options{probes: config(0), decide: decide.Config{MaxPercent: 50}})
		defer r.Stop(t)
		srv := cl.statusServer(r)
		operator := cl.operator()

		// Autopilot's /status with its names; remapped and gpupower are both nvml
		// (two requests to the agent), each reported under its own name.
		code, text := getStatus(t, srv, "/status?check=remapped,gpupower,gpumem&host=gpu-a", operator)
		for _, want := range []string{"[[ REMAPPED ]]", "[[ GPUPOWER ]]", "[[ GPUMEM ]] SUCCESS", "Node Status: Ok"} {
			if code != http.StatusOK || !strings.Contains(text, want) {
				t.Errorf("/status (%d) lacks %q:\n%s", code, want, text)
			}
		}
		run := r.c.Triggers().Dispatcher().List()[0]
		got := map[string]probe.Result{}
		for _, res := range run.Nodes[0].Results {
			got[res.Check] = res
		}
		if got["remapped"].Params["part"] != probe.NVMLPartRemap || got["gpupower"].Params["part"] != probe.NVMLPartClocks ||
			got["gpumem"].Params["n"] == "" || len(got) != 3 {
			t.Errorf("results by the names asked for, with the aliased checks' parameters: %+v", got)
		}
		cl.waitFor("gpuhealth PASS on gpu-a", 20*time.Second, func() bool { return gpuhealth("gpu-a") == autopilot.GPUHealthPass })

		// iperf is iperf3, with its parameters given under the alias.
		run, err = r.c.Triggers().Start(context.Background(), trigger.Request{Nodes: []string{"gpu-a"}, Checks: []string{"iperf"},
			Params: map[string]probe.Params{"iperf": {"peer_node": "gpu-b", "seconds": "1", "min_gbps": "0.1"}}}, proberun.TriggerManual)
		if err != nil {
			t.Fatal(err)
		}
		run, err = r.c.Triggers().Dispatcher().Wait(context.Background(), run.ID)
		if err != nil || len(run.Nodes) != 1 || len(run.Nodes[0].Results) != 1 || run.Nodes[0].Results[0].Check != "iperf" ||
			run.Nodes[0].Results[0].Status != probe.StatusPass {
			t.Errorf("iperf: %+v %v", run.Nodes, err)
		}
		if n := testutil.ToFloat64(r.m.ProbeResults().WithLabelValues("iperf", "pass", "manual")); n != 1 {
			t.Errorf("iperf results counted under the alias: %v", n)
		}

		// A failed check: WARN, as Autopilot says of its periodic checks.
		if code, text := getStatus(t, srv, "/status?check=pciebw&host=gpu-a", operator); code != http.StatusOK {
			t.Fatalf("/status pciebw: %d %s", code, text)
		}
		cl.waitFor("gpuhealth WARN on gpu-a", 20*time.Second, func() bool { return gpuhealth("gpu-a") == autopilot.GPUHealthWarn })

		// A confirmed fault's taint: EVICT, until the taint goes.
		cl.push("gpu-a", time.Now(), xid79)
		cl.waitFor("gpu-a tainted", 30*time.Second, func() bool { return cl.tainted("gpu-a") })
		cl.waitFor("gpuhealth EVICT on gpu-a", 20*time.Second, func() bool { return gpuhealth("gpu-a") == autopilot.GPUHealthEvict })
		if _, err := r.c.Untaint(context.Background(), "gpu-a", "", "untainted by the test"); err != nil {
			t.Fatal(err)
		}
		cl.waitFor("gpuhealth back to WARN on gpu-a", 20*time.Second, func() bool { return gpuhealth("gpu-a") == autopilot.GPUHealthWarn })
		if v := gpuhealth("gpu-b"); v != "" {
			t.Errorf("gpu-b, never probed, has gpuhealth %q", v)
		}
	})

	t.Run("DeepChecks", func(t *testing.T) {
		// A training pod holds GPU 0 of gpu-b; gpu-a is idle and its links are fine now.
		kubelets["gpu-b"].SetPods(testenv.PodWithDevices("training", "llm-0", map[string][]string{"nvidia.com/gpu": {"GPU-0"}}, nil))
		pciebwOutput(t, outputs["gpu-a"], 12)
		r := cl.start(options{probes: config(1600 * time.Millisecond), decide: decide.Config{MaxPercent: 50}})
		defer r.Stop(t)
		var mu sync.Mutex
		seen := map[string]map[string]bool{"gpu-a": {}, "gpu-b": {}}
		stamp := regexp.MustCompile(`^ERR_\d{4}-\d\d-\d\d_\d\d\.\d\d\.\d\dUTC$`)
		cl.waitFor("deep checks on gpu-a: TESTING, then the dcgm level 3 label; gpu-b skipped", 60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for n := range seen {
				seen[n][gpuhealth(n)] = true
			}
			a := cl.node("gpu-a")
			return seen["gpu-a"][autopilot.GPUHealthTesting] && stamp.MatchString(a.Labels[autopilot.LabelDCGMLevel3]) &&
				testutil.ToFloat64(r.m.DeepSkipped().WithLabelValues("gpus-busy")) >= 1
		})
		a := cl.node("gpu-a")
		if out := a.Annotations[autopilot.AnnotationDCGMLevel3Output]; out != "memory.3" {
			t.Errorf("%s = %q, want memory.3 (DCGM's memory test failed on GPU 3)", autopilot.AnnotationDCGMLevel3Output, out)
		}
		// The deep checks' dcgm failure is a WARN, not an EVICT: nothing confirmed a fault.
		cl.waitFor("gpuhealth WARN on gpu-a between deep checks", 20*time.Second, func() bool {
			return gpuhealth("gpu-a") == autopilot.GPUHealthWarn
		})
		if n := testutil.ToFloat64(r.m.ProbeResults().WithLabelValues("dcgm", "fail", "deep")); n < 1 {
			t.Errorf("deep dcgm results: %v", n)
		}
		// gpu-b: never run (no result, no dcgm label), its label back to none.
		for _, run := range r.c.Triggers().Dispatcher().List() {
			for _, nr := range run.Nodes {
				if nr.Node == "gpu-b" && (len(nr.Results) > 0 || nr.Refused != http.StatusConflict) {
					t.Errorf("deep checks on gpu-b, whose GPU a pod holds: %+v", nr)
				}
			}
		}
		cl.waitFor("gpu-b without gpuhealth", 20*time.Second, func() bool { return gpuhealth("gpu-b") == "" })
		if b := cl.node("gpu-b"); b.Labels[autopilot.LabelDCGMLevel3] != "" {
			t.Errorf("gpu-b has %s=%q", autopilot.LabelDCGMLevel3, b.Labels[autopilot.LabelDCGMLevel3])
		}
	})
}

package agent_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// gpuSysfs writes a sysfs tree with two NVIDIA GPUs and returns its root.
func gpuSysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, pci := range []string{"0000:3b:00.0", "0000:86:00.0"} {
		dev := filepath.Join(root, "bus", "pci", "devices", pci)
		if err := os.MkdirAll(dev, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"vendor": "0x10de", "class": "0x030200"} {
			if err := os.WriteFile(filepath.Join(dev, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// The gpu-reset check through the agent, with the real apiserver and a fake
// kubelet and nvidia-smi: refused (409) while a pod holds a GPU, nothing run; on an
// idle node it resets the named GPU under the probing taint, which goes after; an
// address that is not one of the node's GPUs resets nothing.
func TestGPUReset(t *testing.T) {
	f := setup(t, closedChan())
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fakes := testenv.BuildFakeGPUPrograms(t)
	argsFile := filepath.Join(t.TempDir(), "argv")
	t.Setenv("FAULTLINE_FAKE_OUTPUT", filepath.Join(root, "active-probes/checks/testdata/recorded/nvidia-smi/reset-ok.txt"))
	t.Setenv("FAULTLINE_FAKE_ARGS", argsFile)
	t.Setenv("FAULTLINE_FAKE_SLEEP", "500ms") // long enough to see the probing taint
	_, url := serveAgentWith(t, f.asAgent, probe.Default(), agentOptions{kubelet: f.kubelet.Socket,
		config: probe.Config{Commands: map[string]string{"nvidia-smi": filepath.Join(fakes, "nvidia-smi")}, SysfsRoot: gpuSysfs(t)}})
	c := f.client(f.tokens["controller"])
	c.BaseURL = url
	reset := func(pci string) (agentapi.RunResponse, error) {
		return c.Run(ctx, agentapi.RunRequest{Checks: []string{probe.GPUResetCheck}, Params: map[string]probe.Params{probe.GPUResetCheck: {"pci": pci}}})
	}
	ran := func() string {
		b, _ := os.ReadFile(argsFile)
		return strings.TrimSpace(string(b))
	}

	f.kubelet.SetPods(testenv.PodWithDevices("training", "llm-0", map[string][]string{"nvidia.com/gpu": {"GPU-5d7c"}}, nil))
	_, err = reset("0000:3b:00.0")
	if ae := wantCode(t, "reset under a GPU pod", err, http.StatusConflict); len(ae.Pods) != 1 || !strings.HasPrefix(ae.Pods[0], "training/llm-0") {
		t.Errorf("refusal %q names pods %q", ae.Message, ae.Pods)
	}
	if ran() != "" || tainted(t, f) {
		t.Fatalf("a refused reset ran (%q) or tainted the node", ran())
	}

	f.kubelet.SetPods()
	done := make(chan error, 1)
	var out agentapi.RunResponse
	go func() {
		var err error
		out, err = reset("3b:00.0")
		done <- err
	}()
	eventually.True(t, 10*time.Second, "the probing taint while the reset runs", func() bool { return tainted(t, f) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || out.Results[0].Status != probe.StatusPass || len(out.Results[0].Devices) != 1 || out.Results[0].Devices[0].PCI != "0000:3b:00.0" {
		t.Errorf("reset: %+v", out)
	}
	if got := ran(); got != `["nvidia-smi","--gpu-reset","-i","0000:3b:00.0"]` {
		t.Errorf("argv %q", got)
	}
	if tainted(t, f) {
		t.Error("the probing taint outlived the reset")
	}

	// Bad addresses: refused before anything runs (400), or not the node's GPU.
	if _, err := reset("0000:3b:00.0 -i 0"); err == nil {
		t.Error("a malformed address was accepted")
	} else {
		wantCode(t, "malformed address", err, http.StatusBadRequest)
	}
	out, err = reset("0000:07:00.0")
	if err != nil || out.Results[0].Status != probe.StatusError || !strings.Contains(out.Results[0].Message, "not a GPU of this node") {
		t.Errorf("foreign address: %+v %v", out, err)
	}
	if got := ran(); strings.Count(got, "\n") != 0 {
		t.Errorf("nvidia-smi ran again for bad addresses: %q", got)
	}
}

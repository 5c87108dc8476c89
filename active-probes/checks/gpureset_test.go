package checks

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/promtest"
)

func TestGPUResetNamedGPUs(t *testing.T) {
	path, args := fake(t, "nvidia-smi", "nvidia-smi/reset-ok.txt")
	res, prom := runOne(t, mustSpec(t, probe.GPUResetCheck), &GPUReset{Path: path, GPUs: dgxLinks()}, probe.Params{"pci": "0000:47:00.0, 0F:00.0"})
	wantStatus(t, "named", res.Status, probe.StatusPass)
	if len(res.Devices) != 2 || deviceStatus(t, res, "2", probe.StatusPass).PCI != "0000:47:00.0" || deviceStatus(t, res, "1", probe.StatusPass).PCI != "0000:0f:00.0" {
		t.Errorf("devices: %+v", res.Devices)
	}
	got := fakeArgs(t, args)
	if len(got) != 2 || got[0] != `["nvidia-smi","--gpu-reset","-i","0000:47:00.0"]` || got[1] != `["nvidia-smi","--gpu-reset","-i","0000:0f:00.0"]` {
		t.Errorf("argv %v", got)
	}
	promtest.Want(t, prom, "faultline_probe_value", map[string]string{"node": "gpu-node-07", "check": probe.GPUResetCheck, "device": "", "metric": "gpus_reset"}, 2)
}

func TestGPUResetAllOfTheNode(t *testing.T) {
	path, args := fake(t, "nvidia-smi", "nvidia-smi/reset-ok.txt")
	res, _ := runOne(t, mustSpec(t, probe.GPUResetCheck), &GPUReset{Path: path, GPUs: dgxLinks()}, nil)
	wantStatus(t, "all", res.Status, probe.StatusPass)
	if got := fakeArgs(t, args); len(got) != 8 || got[7] != `["nvidia-smi","--gpu-reset","-i","0000:bd:00.0"]` {
		t.Errorf("argv %v", got)
	}
	// The node's GPUs unknown: nvidia-smi picks them (no -i).
	path, args = fake(t, "nvidia-smi", "nvidia-smi/reset-ok.txt")
	res, _ = runOne(t, mustSpec(t, probe.GPUResetCheck), &GPUReset{Path: path, GPUs: staticLinks(nil)}, nil)
	wantStatus(t, "unknown GPUs", res.Status, probe.StatusPass)
	if got := fakeArgs(t, args); len(got) != 1 || got[0] != `["nvidia-smi","--gpu-reset"]` {
		t.Errorf("argv %v", got)
	}
}

func TestGPUResetRefusedByTheDriver(t *testing.T) {
	path, _ := fake(t, "nvidia-smi", "nvidia-smi/reset-in-use.txt")
	res, _ := runOne(t, mustSpec(t, probe.GPUResetCheck), &GPUReset{Path: path, GPUs: dgxLinks()}, probe.Params{"pci": "0000:07:00.0"})
	wantStatus(t, "in use", res.Status, probe.StatusFail)
	if d := deviceStatus(t, res, "0", probe.StatusFail); !strings.Contains(d.Message, "exit 255") || !strings.Contains(d.Message, "in use by another process") {
		t.Errorf("message %q", d.Message)
	}
}

func TestGPUResetParameters(t *testing.T) {
	spec := mustSpec(t, probe.GPUResetCheck)
	if !spec.IsInvasive(nil) {
		t.Error("gpu-reset is not invasive")
	}
	for _, bad := range []string{"-i 0", "0000:3b:00.0;reboot", "3b", "0000:3b:20.0", strings.Repeat("0000:3b:00.0,", 65) + "0000:3b:00.0"} {
		if _, err := spec.Params.Resolve(probe.Params{"pci": bad}); err == nil {
			t.Errorf("pci=%q accepted", bad)
		}
	}
	// An address that is not one of the node's GPUs runs nothing.
	path, args := fake(t, "nvidia-smi", "nvidia-smi/reset-ok.txt")
	g := &GPUReset{Path: path, GPUs: dgxLinks()}
	if _, err := g.Run(context.Background(), probe.Params{"pci": "0000:07:00.0,0000:3b:00.0"}); err == nil || !strings.Contains(err.Error(), "0000:3b:00.0 is not a GPU of this node") {
		t.Errorf("err %v", err)
	}
	if _, err := os.Stat(args); err == nil {
		t.Error("nvidia-smi ran for a request naming a foreign address")
	}
}

package checks

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/promtest"
)

// dgxLinks is a DGX A100's GPUs as a link source would report them (gen4 x16 each).
func dgxLinks() staticLinks {
	pci := []string{"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0", "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"}
	var l staticLinks
	for i, p := range pci {
		l = append(l, GPULink{Index: i, PCI: p, Name: "NVIDIA A100-SXM4-80GB", Link: PCIeLink{Gen: 4, Width: 16, MaxGen: 4, MaxWidth: 16}})
	}
	return l
}

type staticLinks []GPULink

func (s staticLinks) GPULinks(context.Context) ([]GPULink, error) { return s, nil }

func TestPCIeBWPass(t *testing.T) {
	path, args := fake(t, "pciebw", "pciebw/dgxa100-pass.jsonl")
	res, prom := runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: dgxLinks()}, nil)
	wantStatus(t, "healthy", res.Status, probe.StatusPass)
	if len(res.Devices) != 8 {
		t.Fatalf("%d devices", len(res.Devices))
	}
	d := res.Devices[0]
	if d.PCI != "0000:07:00.0" || d.Values["h2d_gbps"] != 24.61 || d.Values["min_gbps"] < 15.7 || d.Values["min_gbps"] > 15.8 {
		t.Errorf("device 0: %+v", d)
	}
	promtest.Want(t, prom, "faultline_probe_value", map[string]string{"node": "gpu-node-07", "check": "pciebw", "device": "2", "metric": "d2h_gbps"}, 24.31)
	if got := fakeArgs(t, args); len(got) != 1 || got[0] != `["pciebw","--size-mb","256","--iters","20"]` {
		t.Errorf("argv %v", got)
	}
}

func TestPCIeBWSlowGPUs(t *testing.T) {
	// GPU 3 copies at 2 GB/s: below the 4 GB/s floor. GPU 5 at 12 GB/s: fine for a x8
	// link, half of what its x16 link should carry.
	path, _ := fake(t, "pciebw", "pciebw/dgxa100-gpu3-slow-gpu5-x8.jsonl")
	res, _ := runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: dgxLinks()}, nil)
	wantStatus(t, "slow", res.Status, probe.StatusFail)
	d3 := deviceStatus(t, res, "3", probe.StatusFail)
	if !strings.Contains(d3.Message, "host-to-device 2.1, device-to-host 1.9 GB/s; minimum 15.8 GB/s (50% of gen4 x16, 31.5 GB/s)") {
		t.Errorf("GPU 3: %q", d3.Message)
	}
	deviceStatus(t, res, "5", probe.StatusFail)
	deviceStatus(t, res, "0", probe.StatusPass)

	// The same output when GPU 5's link can only be x8: 12 GB/s is then fine.
	links := dgxLinks()
	links[5].Link.MaxWidth = 8
	res, _ = runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: links}, nil)
	deviceStatus(t, res, "5", probe.StatusPass)
	deviceStatus(t, res, "3", probe.StatusFail)

	// Without link information only the floor judges: GPU 5 passes, GPU 3 fails.
	res, _ = runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path}, probe.Params{"floor_gbps": "4"})
	deviceStatus(t, res, "5", probe.StatusPass)
	d3 = deviceStatus(t, res, "3", probe.StatusFail)
	if !strings.Contains(d3.Message, "the 4.0 GB/s floor") {
		t.Errorf("GPU 3 without links: %q", d3.Message)
	}
}

func TestPCIeBWErrors(t *testing.T) {
	spec := mustSpec(t, "pciebw")
	// A GPU whose copy failed (uncorrectable ECC) fails; the program's exit 1 is noted.
	path, _ := fake(t, "pciebw", "pciebw/dgxa100-gpu6-ecc.jsonl")
	res, _ := runOne(t, spec, &PCIeBW{Path: path, Links: dgxLinks()}, nil)
	wantStatus(t, "ECC", res.Status, probe.StatusFail)
	if d := deviceStatus(t, res, "6", probe.StatusFail); !strings.Contains(d.Message, "uncorrectable ECC error") {
		t.Errorf("GPU 6: %q", d.Message)
	}
	if !strings.Contains(res.Message, "pciebw exited 1") {
		t.Errorf("message %q", res.Message)
	}

	// A GPU that PCIe shows but CUDA does not fails.
	path, _ = fake(t, "pciebw", "pciebw/dgxa100-7-visible.jsonl")
	res, _ = runOne(t, spec, &PCIeBW{Path: path, Links: dgxLinks()}, nil)
	if d := deviceStatus(t, res, "4", probe.StatusFail); !strings.Contains(d.Message, "did not measure it") {
		t.Errorf("GPU 4: %q", d.Message)
	}

	// No GPU for CUDA: the probe cannot run.
	path, _ = fake(t, "pciebw", "pciebw/no-gpu.jsonl")
	res, _ = runOne(t, spec, &PCIeBW{Path: path, Links: dgxLinks()}, nil)
	wantStatus(t, "no GPU", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "printed no result") || !strings.Contains(res.Message, "no CUDA-capable device") {
		t.Errorf("message %q", res.Message)
	}

	// Truncated output.
	path, _ = fake(t, "pciebw", "pciebw/garbage.jsonl")
	res, _ = runOne(t, spec, &PCIeBW{Path: path}, nil)
	wantStatus(t, "garbage", res.Status, probe.StatusError)

	// The program is missing.
	res, _ = runOne(t, spec, &PCIeBW{Path: filepath.Join(t.TempDir(), "pciebw")}, nil)
	wantStatus(t, "missing", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "program not found") {
		t.Errorf("message %q", res.Message)
	}

	// The program hangs: the timeout kills it.
	path, _ = fake(t, "pciebw", "pciebw/dgxa100-pass.jsonl")
	t.Setenv("FAULTLINE_FAKE_SLEEP", "1m")
	spec.DefaultTimeout = 300 * time.Millisecond
	start := time.Now()
	res, _ = runOne(t, spec, &PCIeBW{Path: path}, nil)
	wantStatus(t, "hung", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "timed out after 300ms") || time.Since(start) > 5*time.Second {
		t.Errorf("hung: %q after %v", res.Message, time.Since(start))
	}
}

func TestPCIeBWSelectedGPUs(t *testing.T) {
	path, args := fake(t, "pciebw", "pciebw/dgxa100-gpu3-slow-gpu5-x8.jsonl")
	res, _ := runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: dgxLinks()},
		probe.Params{"gpus": "0,1", "size_mb": "64", "iters": "5"})
	wantStatus(t, "GPUs 0,1", res.Status, probe.StatusPass)
	if len(res.Devices) != 2 {
		t.Errorf("devices: %+v", res.Devices)
	}
	if got := fakeArgs(t, args); got[0] != `["pciebw","--size-mb","64","--iters","5","--gpus","0,1"]` {
		t.Errorf("argv %v", got)
	}
}

func TestPCIeBWSysfsLinks(t *testing.T) {
	root := t.TempDir()
	mk := func(addr, vendor, class, speed, width string) {
		dir := filepath.Join(root, "bus", "pci", "devices", addr)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"vendor": vendor, "class": class, "max_link_speed": speed, "max_link_width": width,
			"current_link_speed": speed, "current_link_width": width} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	pci := []string{"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0", "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"}
	for i, p := range pci {
		w := "16"
		if i == 5 {
			w = "8"
		}
		mk(p, "0x10de", "0x030200", "16.0 GT/s PCIe", w)
	}
	mk("0000:00:14.0", "0x8086", "0x0c0330", "", "")                 // USB controller
	mk("0000:0a:00.0", "0x15b3", "0x020700", "16.0 GT/s PCIe", "16") // ConnectX NIC
	mk("0000:c1:00.1", "0x10de", "0x040300", "16.0 GT/s PCIe", "16") // NVIDIA audio function
	links, err := SysfsLinks{Root: root}.GPULinks(context.Background())
	if err != nil || len(links) != 8 || links[5].Link.MaxWidth != 8 || links[0].Link.MaxGen != 4 || links[0].Index != -1 {
		t.Fatalf("links %+v %v", links, err)
	}
	path, _ := fake(t, "pciebw", "pciebw/dgxa100-gpu3-slow-gpu5-x8.jsonl")
	res, _ := runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: SysfsLinks{Root: root}}, nil)
	deviceStatus(t, res, "5", probe.StatusPass) // x8 slot: 12 GB/s is 76% of 15.75
	deviceStatus(t, res, "3", probe.StatusFail)
	deviceStatus(t, res, "0", probe.StatusPass)

	// sysfs shows every GPU of the machine, also those this container was not given:
	// a GPU CUDA does not show is not a fault then.
	path, _ = fake(t, "pciebw", "pciebw/dgxa100-7-visible.jsonl")
	res, _ = runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: SysfsLinks{Root: root}}, nil)
	wantStatus(t, "7 of 8 visible, sysfs", res.Status, probe.StatusPass)

	// NVML missing, sysfs answers.
	chain := firstLinks{staticLinks(nil), SysfsLinks{Root: root}}
	if l, err := chain.GPULinks(context.Background()); err != nil || len(l) != 8 {
		t.Errorf("chain: %d %v", len(l), err)
	}
	if _, err := (SysfsLinks{Root: filepath.Join(root, "nope")}).GPULinks(context.Background()); err == nil {
		t.Error("missing sysfs: no error")
	}
}

// The outputs of cuda/pciebw recorded on an H200 SXM on PCIe gen5 x16
// (testdata/recorded/README.md; NVML reported the link as below): 55.3-55.5 GB/s
// each way whatever the copy size, 88% of the link's 63.0 GB/s, well above the
// default minimum of half of it; a GPU index that does not exist is an error with
// pciebw's reason.
func TestPCIeBWRecordedH200(t *testing.T) {
	links := staticLinks{{Index: 0, PCI: "0000:00:06.0", Name: "NVIDIA H200", Link: PCIeLink{Gen: 5, Width: 16, MaxGen: 5, MaxWidth: 16}}}
	for _, rec := range []string{"pciebw/h200-pass.jsonl", "pciebw/h200-64mb.jsonl", "pciebw/h200-1gb.jsonl"} {
		path, _ := fake(t, "pciebw", rec)
		res, _ := runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: links}, nil)
		wantStatus(t, rec, res.Status, probe.StatusPass)
		d := deviceStatus(t, res, "0", probe.StatusPass)
		for _, k := range []string{"h2d_gbps", "d2h_gbps"} {
			if v := d.Values[k]; v < 55 || v > 56 {
				t.Errorf("%s: %s %v", rec, k, v)
			}
		}
		if math.Abs(d.Values["link_gbps"]-63.015) > 0.001 || math.Abs(d.Values["min_gbps"]-31.508) > 0.001 {
			t.Errorf("%s: link %v", rec, d.Values)
		}
	}
	path, _ := fake(t, "pciebw", "pciebw/h200-no-such-gpu.jsonl")
	res, _ := runOne(t, mustSpec(t, "pciebw"), &PCIeBW{Path: path, Links: links}, probe.Params{"gpus": "1"})
	wantStatus(t, "GPU 1 of 1", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "GPU 1 does not exist (1 GPUs)") {
		t.Errorf("message %q", res.Message)
	}
}

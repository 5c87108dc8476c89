package checks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/promtest"
)

func TestGPUThresholdTable(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-80GB":   "A100-SXM4-80GB",
		"NVIDIA A100-SXM4-40GB":   "A100",
		"NVIDIA A100 80GB PCIe":   "A100 80GB PCIe",
		"NVIDIA A100-PCIE-40GB":   "A100",
		"NVIDIA H100 80GB HBM3":   "H100",
		"NVIDIA H100 PCIe":        "H100 PCIe",
		"NVIDIA H100 NVL":         "H100 NVL",
		"NVIDIA H200":             "H200",
		"NVIDIA H200 NVL":         "H200 NVL",
		"NVIDIA GH200 480GB":      "GH200",
		"NVIDIA B200":             "B200",
		"Tesla V100-SXM2-32GB":    "V100-SXM2",
		"Tesla V100S-PCIE-32GB":   "V100S",
		"NVIDIA A30":              "A30",
		"NVIDIA L40S":             "",
		"NVIDIA GeForce RTX 4090": "",
	} {
		got, ok := LookupGPUThreshold(DefaultGPUThresholds, name)
		if got.Match != want || ok != (want != "") {
			t.Errorf("%s: matched %q, want %q", name, got.Match, want)
		}
	}
	// Every default is a datasheet peak, never zero.
	for _, e := range DefaultGPUThresholds {
		if e.DGEMMTFLOPS <= 0 || e.DAXPYGBps <= 0 {
			t.Errorf("%s: %+v", e.Match, e)
		}
	}
}

func TestDGEMMPass(t *testing.T) {
	path, args := fake(t, "dgemm", "dgemm/dgxa100-pass.jsonl")
	res, prom := runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, nil)
	wantStatus(t, "healthy", res.Status, probe.StatusPass)
	d := deviceStatus(t, res, "0", probe.StatusPass)
	if d.Values["dgemm_tflops"] != 18.92 || !near(d.Values["min_dgemm_tflops"], 13.65) || !near(d.Values["min_daxpy_gbps"], 1427.3) {
		t.Errorf("values %v", d.Values)
	}
	promtest.Want(t, prom, "faultline_probe_value", map[string]string{"node": "gpu-node-07", "check": "dgemm", "device": "7", "metric": "daxpy_gbps"}, 1737.7)
	if got := fakeArgs(t, args); got[0] != `["dgemm","--n","8192","--iters","10"]` {
		t.Errorf("argv %v", got)
	}
}

func TestDGEMMSlowGPUs(t *testing.T) {
	// GPU 2 reaches 9.4 TFLOPS (a throttled GPU), GPU 6 1186 GB/s (a sick HBM stack).
	path, _ := fake(t, "dgemm", "dgemm/dgxa100-gpu2-slow-gpu6-hbm.jsonl")
	res, _ := runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, nil)
	wantStatus(t, "slow", res.Status, probe.StatusFail)
	if d := deviceStatus(t, res, "2", probe.StatusFail); !strings.Contains(d.Message, "DGEMM 9.41 TFLOPS below 13.65") {
		t.Errorf("GPU 2: %q", d.Message)
	}
	if d := deviceStatus(t, res, "6", probe.StatusFail); !strings.Contains(d.Message, "DAXPY 1186 GB/s below 1427") {
		t.Errorf("GPU 6: %q", d.Message)
	}
	deviceStatus(t, res, "0", probe.StatusPass)

	// A lower ratio lets both through.
	res, _ = runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, probe.Params{"ratio": "0.45"})
	wantStatus(t, "ratio 0.45", res.Status, probe.StatusPass)
}

func TestDGEMMThresholdsFile(t *testing.T) {
	path, _ := fake(t, "dgemm", "dgemm/dgxa100-gpu2-slow-gpu6-hbm.jsonl")
	dir := t.TempDir()
	file := filepath.Join(dir, "thresholds.yaml")
	// The operator accepts 9 TFLOPS on this fleet's A100s (power-capped) and sets the
	// HBM minimum by hand.
	os.WriteFile(file, []byte(`# power-capped A100s
- match: A100-SXM4-80GB
  dgemm_tflops: 19.5
  daxpy_gbps: 2039
  min_dgemm_tflops: 9
  min_daxpy_gbps: 1100
`), 0o644)
	res, _ := runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, probe.Params{"thresholds": file})
	wantStatus(t, "override", res.Status, probe.StatusPass)

	// JSON works too; an entry for a model not on the node changes nothing.
	jsonFile := filepath.Join(dir, "thresholds.json")
	os.WriteFile(jsonFile, []byte(`[{"match": "H100", "dgemm_tflops": 67, "daxpy_gbps": 3350}]`), 0o644)
	res, _ = runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, probe.Params{"thresholds": jsonFile})
	wantStatus(t, "unrelated override", res.Status, probe.StatusFail)

	// A broken file is an error, not a silent fallback to the defaults.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("- match: A100\n  dgemm_tflop: 19.5\n"), 0o644)
	res, _ = runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, probe.Params{"thresholds": bad})
	wantStatus(t, "typo in the file", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "dgemm_tflop") {
		t.Errorf("message %q", res.Message)
	}
}

func TestDGEMMUnknownModel(t *testing.T) {
	path, _ := fake(t, "dgemm", "dgemm/l40s-unknown.jsonl")
	res, prom := runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, nil)
	wantStatus(t, "L40S", res.Status, probe.StatusSkipped)
	if d := deviceStatus(t, res, "0", probe.StatusSkipped); d.Values["dgemm_tflops"] != 1.21 || !strings.Contains(d.Message, "no threshold for \"NVIDIA L40S\"") {
		t.Errorf("device: %+v", d)
	}
	// The measurement is still exported; the verdict is not.
	promtest.Want(t, prom, "faultline_probe_value", map[string]string{"node": "gpu-node-07", "check": "dgemm", "device": "0", "metric": "dgemm_tflops"}, 1.21)
	if _, ok := promtest.Value(t, prom, "faultline_probe_result", map[string]string{"node": "gpu-node-07", "check": "dgemm", "device": "0"}); ok {
		t.Error("a skipped device has a verdict")
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// A thresholds file is bounded in size and in every figure: a peak of 1e9 TFLOPS
// would fail every GPU, a negative minimum pass every one.
func TestDGEMMThresholdsBounded(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"huge figure":   "- match: A100\n  dgemm_tflops: 1e9\n  daxpy_gbps: 2039\n",
		"negative":      "- match: A100\n  dgemm_tflops: 19.5\n  min_daxpy_gbps: -1\n",
		"too large":     "# " + strings.Repeat("x", maxThresholdsFile) + "\n- match: A100\n",
		"without match": "- dgemm_tflops: 19.5\n",
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadGPUThresholds(file); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := filepath.Join(dir, "ok.yaml")
	os.WriteFile(ok, []byte("- match: A100\n  dgemm_tflops: 19.5\n  daxpy_gbps: 2039\n"), 0o644)
	if table, err := LoadGPUThresholds(ok); err != nil || len(table) != 1 {
		t.Errorf("a valid file: %v %v", table, err)
	}
}

// The outputs of cuda/dgemm recorded on an H200 SXM (testdata/recorded/README.md):
// every run passes the H200 thresholds, the lowest DAXPY (right after a long DGEMM)
// included, and a GPU index that does not exist is an error with dgemm's reason.
func TestDGEMMRecordedH200(t *testing.T) {
	for _, rec := range []string{"dgemm/h200-pass.jsonl", "dgemm/h200-n4096.jsonl", "dgemm/h200-n16384.jsonl", "dgemm/h200-n16384-20iters.jsonl"} {
		path, _ := fake(t, "dgemm", rec)
		res, _ := runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, nil)
		wantStatus(t, rec, res.Status, probe.StatusPass)
		d := deviceStatus(t, res, "0", probe.StatusPass)
		if d.PCI != "0000:00:06.0" || d.Name != "NVIDIA H200" || d.Values["dgemm_tflops"] < 63 || d.Values["dgemm_tflops"] > 67 ||
			d.Values["daxpy_gbps"] < 3600 || d.Values["daxpy_gbps"] > 4800 {
			t.Errorf("%s: %+v", rec, d)
		}
		if !near(d.Values["min_dgemm_tflops"], 46.9) || d.Values["min_daxpy_gbps"] != 3200 {
			t.Errorf("%s: thresholds %v", rec, d.Values)
		}
	}
	path, _ := fake(t, "dgemm", "dgemm/h200-no-such-gpu.jsonl")
	res, _ := runOne(t, mustSpec(t, "dgemm"), &DGEMM{Path: path}, probe.Params{"gpus": "1"})
	wantStatus(t, "GPU 1 of 1", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "GPU 1 does not exist (1 GPUs)") {
		t.Errorf("message %q", res.Message)
	}
}

package checks

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The dgemm check (its metadata: probe/dgemm.go) runs cuda/dgemm.
func init() {
	probe.Implement(probe.DGEMMCheck, func(c probe.Config) probe.Probe { return &DGEMM{Path: c.Command("dgemm")} })
}

// GPUThreshold is what one GPU model should reach. Match is a case-insensitive
// substring of the name CUDA reports ("A100-SXM4-80GB"); the first entry that matches
// wins, so the more specific entries come first. Peaks are datasheet figures; a run
// must reach ratio × peak unless an absolute minimum is set.
type GPUThreshold struct {
	Match          string  `json:"match"`
	DGEMMTFLOPS    float64 `json:"dgemm_tflops"`               // FP64 peak (tensor core where present)
	DAXPYGBps      float64 `json:"daxpy_gbps"`                 // memory bandwidth peak, GB/s
	MinDGEMMTFLOPS float64 `json:"min_dgemm_tflops,omitempty"` // overrides ratio × peak
	MinDAXPYGBps   float64 `json:"min_daxpy_gbps,omitempty"`   // overrides ratio × peak
}

// DefaultGPUThresholds are NVIDIA's datasheet peaks: FP64 tensor-core TFLOPS (FP64 for
// GPUs without FP64 tensor cores) and HBM bandwidth in GB/s. Models whose FP64 is cut
// down (H800, L40S, ...) are left out on purpose: add them in a thresholds file. With the default ratio of
// 0.7 an A100-SXM4-80GB must reach 13.7 TFLOPS and 1427 GB/s; healthy ones measure about
// 18-19 TFLOPS and 1.7-1.8 TB/s with cuBLAS and a DAXPY kernel.
var DefaultGPUThresholds = []GPUThreshold{
	{Match: "GH200", DGEMMTFLOPS: 67, DAXPYGBps: 4000},
	{Match: "H200 NVL", DGEMMTFLOPS: 60, DAXPYGBps: 4800, MinDAXPYGBps: 3200},
	// Measured on an H200 SXM (driver 580.159.04, CUDA 13.0; testdata/recorded):
	// DGEMM 63.2-65.5 TFLOPS (94-98% of 67), DAXPY 3,650-4,140 GB/s (76-86% of
	// 4,800; the low end right after a long DGEMM). 0.7 × 4,800 = 3,360 would
	// leave a healthy GPU under 10%; 3,200 is 12% below the lowest healthy run.
	{Match: "H200", DGEMMTFLOPS: 67, DAXPYGBps: 4800, MinDAXPYGBps: 3200},
	{Match: "H100 NVL", DGEMMTFLOPS: 60, DAXPYGBps: 3900},
	{Match: "H100 PCIe", DGEMMTFLOPS: 51, DAXPYGBps: 2000},
	{Match: "H100", DGEMMTFLOPS: 67, DAXPYGBps: 3350}, // SXM5 80GB HBM3
	{Match: "B200", DGEMMTFLOPS: 40, DAXPYGBps: 8000},
	{Match: "A100-SXM4-80GB", DGEMMTFLOPS: 19.5, DAXPYGBps: 2039},
	{Match: "A100 80GB PCIe", DGEMMTFLOPS: 19.5, DAXPYGBps: 1935},
	{Match: "A100", DGEMMTFLOPS: 19.5, DAXPYGBps: 1555}, // 40GB, SXM4 and PCIe
	{Match: "A800", DGEMMTFLOPS: 19.5, DAXPYGBps: 1555},
	{Match: "A30", DGEMMTFLOPS: 10.3, DAXPYGBps: 933},
	{Match: "V100S", DGEMMTFLOPS: 8.2, DAXPYGBps: 1134},
	{Match: "V100-SXM2", DGEMMTFLOPS: 7.8, DAXPYGBps: 900},
	{Match: "V100", DGEMMTFLOPS: 7.0, DAXPYGBps: 900},
}

// LookupGPUThreshold returns the first entry of table whose Match is in name.
func LookupGPUThreshold(table []GPUThreshold, name string) (GPUThreshold, bool) {
	n := strings.ToLower(name)
	for _, t := range table {
		if t.Match != "" && strings.Contains(n, strings.ToLower(t.Match)) {
			return t, true
		}
	}
	return GPUThreshold{}, false
}

// Bounds of a thresholds file: its size, and every TFLOPS or GB/s figure in it (well
// above any GPU's).
const (
	maxThresholdsFile = 1 << 20
	maxThreshold      = 100000
)

// LoadGPUThresholds reads an operator's table (YAML or JSON list of GPUThreshold).
// The file is bounded (maxThresholdsFile) and so is every figure (maxThreshold): a
// mistyped peak would pass or fail every GPU.
func LoadGPUThresholds(path string) ([]GPUThreshold, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("thresholds: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxThresholdsFile+1))
	if err != nil {
		return nil, fmt.Errorf("thresholds %s: %w", path, err)
	}
	if len(b) > maxThresholdsFile {
		return nil, fmt.Errorf("thresholds %s: larger than %d bytes", path, maxThresholdsFile)
	}
	var t []GPUThreshold
	if err := yaml.UnmarshalStrict(b, &t); err != nil {
		return nil, fmt.Errorf("thresholds %s: %w", path, err)
	}
	for i, e := range t {
		if e.Match == "" {
			return nil, fmt.Errorf("thresholds %s: entry %d has no match", path, i)
		}
		for _, v := range []float64{e.DGEMMTFLOPS, e.DAXPYGBps, e.MinDGEMMTFLOPS, e.MinDAXPYGBps} {
			if v < 0 || v > maxThreshold || math.IsNaN(v) {
				return nil, fmt.Errorf("thresholds %s: entry %q: %g is not between 0 and %g", path, e.Match, v, float64(maxThreshold))
			}
		}
	}
	return t, nil
}

// DGEMM is the dgemm probe.
type DGEMM struct {
	// Path is the dgemm program (cuda/dgemm).
	Path string
	// Table replaces DefaultGPUThresholds when not nil.
	Table []GPUThreshold
}

// Run implements Probe.
func (g *DGEMM) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	table := g.Table
	if table == nil {
		table = DefaultGPUThresholds
	}
	if path := p.String("thresholds"); path != "" {
		custom, err := LoadGPUThresholds(path)
		if err != nil {
			return probe.Result{}, err
		}
		table = append(custom, table...)
	}
	args := append([]string{"--n", p.String("n"), "--iters", p.String("iters")}, gpuArgs(p)...)
	lines, out, err := runGPUProgram(ctx, "dgemm", g.Path, args)
	if err != nil {
		return probe.Result{}, err
	}
	ratio := p.Float("ratio")
	var res probe.Result
	lowT, lowB, measured := math.Inf(1), math.Inf(1), 0
	var unknown []string
	for _, l := range lines {
		d := l.device()
		if l.Error != "" {
			d.Status, d.Message = probe.StatusFail, l.Error
			res.Devices = append(res.Devices, d)
			continue
		}
		if l.DGEMMTFLOPS == nil || l.DAXPYGBps == nil {
			d.Status, d.Message = probe.StatusError, "no dgemm_tflops/daxpy_gbps in the output"
			res.Devices = append(res.Devices, d)
			continue
		}
		tflops, gbps := *l.DGEMMTFLOPS, *l.DAXPYGBps
		d.SetValue("dgemm_tflops", tflops)
		d.SetValue("daxpy_gbps", gbps)
		measured++
		lowT, lowB = math.Min(lowT, tflops), math.Min(lowB, gbps)
		t, ok := LookupGPUThreshold(table, l.Name)
		if !ok {
			d.Status = probe.StatusSkipped
			d.Message = fmt.Sprintf("no threshold for %q: add it to the thresholds file", l.Name)
			unknown = append(unknown, d.ID)
			res.Devices = append(res.Devices, d)
			continue
		}
		minT, minB := t.MinDGEMMTFLOPS, t.MinDAXPYGBps
		if minT == 0 {
			minT = ratio * t.DGEMMTFLOPS
		}
		if minB == 0 {
			minB = ratio * t.DAXPYGBps
		}
		d.SetValue("min_dgemm_tflops", minT)
		d.SetValue("min_daxpy_gbps", minB)
		var f findings
		if tflops < minT {
			f.add(probe.StatusFail, "DGEMM %.2f TFLOPS below %.2f (%s peak %.1f)", tflops, minT, t.Match, t.DGEMMTFLOPS)
		}
		if gbps < minB {
			f.add(probe.StatusFail, "DAXPY %.0f GB/s below %.0f (%s peak %.0f)", gbps, minB, t.Match, t.DAXPYGBps)
		}
		d.Status, d.Message = f.status(), f.message()
		res.Devices = append(res.Devices, d)
	}
	res.Status = res.DeviceStatus()
	res.Message = res.Summary()
	if measured > 0 {
		res.Message = joinMsg(res.Message, fmt.Sprintf("%d GPUs measured, lowest DGEMM %.2f TFLOPS, lowest DAXPY %.0f GB/s", measured, lowT, lowB))
	}
	if len(unknown) > 0 {
		res.Message = joinMsg(res.Message, fmt.Sprintf("GPU %s not judged: model not in the threshold table", strings.Join(unknown, ",")))
	}
	noteExit(&res, "dgemm", out)
	return res, nil
}

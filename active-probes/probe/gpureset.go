package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The gpu-reset check resets GPUs through the driver's tool, `nvidia-smi --gpu-reset
// -i <pci>`, one GPU at a time: the escalation ladder's gpu-reset step asks for it
// before re-running the rule's confirming probe. A reset kills every context on the
// GPU, so the check is invasive: the agent runs it only when no container holds a GPU
// device (or with force) and under the probing taint. The driver refuses a GPU that a
// process still uses; nvidia-smi then exits non-zero and the GPU fails the check.
//
// The GPUs are named by PCI address ("pci"); none named resets every GPU of the node.
// Named addresses must be the node's GPUs when the node's GPUs can be listed (NVML,
// else sysfs); when they cannot, the address format alone is checked, and a request
// naming none leaves the choice to nvidia-smi (which then resets all GPUs).
func init() {
	Register(Spec{
		Name:           GPUResetCheck,
		Help:           "reset idle GPUs with nvidia-smi --gpu-reset (by PCI address; default: all of the node's)",
		DefaultTimeout: 2 * time.Minute,
		Invasive:       true,
		Params:         gpuResetParams,
		New: func(c Config) Probe {
			return &GPUReset{Path: c.Command("nvidia-smi"), GPUs: defaultLinkSource(c)}
		},
	})
}

// GPUResetCheck is the gpu-reset check's name.
const GPUResetCheck = "gpu-reset"

// maxResetGPUs bounds the addresses one request names (a node has at most a few
// dozen GPUs).
const maxResetGPUs = 64

var gpuResetParams = Schema{
	{Name: "pci", Type: TypeString, Check: checkPCIList,
		Help: "PCI addresses of the GPUs to reset, comma-separated (0000:3b:00.0; default: all of the node's)"},
}

// checkPCIList accepts a comma-separated list of at most maxResetGPUs PCI addresses.
func checkPCIList(v string) error {
	_, err := parsePCIList(v)
	return err
}

func parsePCIList(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	fields := strings.Split(v, ",")
	if len(fields) > maxResetGPUs {
		return nil, fmt.Errorf("more than %d addresses", maxResetGPUs)
	}
	out := make([]string, 0, len(fields))
	seen := map[string]bool{}
	for _, f := range fields {
		a := NormalizePCI(f)
		if a == "" {
			return nil, fmt.Errorf("%q is not a PCI address (domain:bus:device.function, e.g. 0000:3b:00.0)", strings.TrimSpace(f))
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// GPUReset is the gpu-reset check.
type GPUReset struct {
	// Path is the nvidia-smi program.
	Path string
	// GPUs lists the node's GPUs (their PCI addresses); nil or an empty answer: not
	// known.
	GPUs LinkSource
}

// Name implements Probe.
func (*GPUReset) Name() string { return GPUResetCheck }

// Run implements Probe.
func (g *GPUReset) Run(ctx context.Context, p Params) (Result, error) {
	p, err := gpuResetParams.Resolve(p)
	if err != nil {
		return Result{}, err
	}
	want, _ := parsePCIList(p.String("pci"))
	var known []GPULink
	if g.GPUs != nil {
		known, _ = g.GPUs.GPULinks(ctx) // unknown GPUs: the format check above is all there is
	}
	targets, err := resetTargets(want, known)
	if err != nil {
		return Result{}, err
	}
	if len(targets) == 0 {
		// Nothing to name: nvidia-smi resets every GPU it sees.
		out, err := runCommand(ctx, g.Path, []string{"--gpu-reset"})
		if err != nil {
			return Result{}, err
		}
		st, msg := resetVerdict(out)
		return Result{Status: st, Message: "all GPUs: " + msg}, nil
	}
	var res Result
	for _, t := range targets {
		out, err := runCommand(ctx, g.Path, []string{"--gpu-reset", "-i", t.PCI})
		if err != nil {
			return Result{}, err
		}
		st, msg := resetVerdict(out)
		id := t.PCI
		if t.Index >= 0 {
			id = fmt.Sprint(t.Index)
		}
		res.Devices = append(res.Devices, DeviceResult{ID: id, PCI: t.PCI, Name: t.Name, Status: st, Message: msg})
	}
	res.Status = res.DeviceStatus()
	res.Message = res.Summary()
	if res.Status == StatusPass {
		res.Message = fmt.Sprintf("%d GPU(s) reset", len(res.Devices))
	}
	res.SetValue("gpus_reset", float64(countStatus(res.Devices, StatusPass)))
	return res, nil
}

// resetTargets picks the GPUs to reset: the named ones, each of which must be one of
// the node's when those are known; none named: all the known ones.
func resetTargets(want []string, known []GPULink) ([]GPULink, error) {
	if len(want) == 0 {
		return known, nil
	}
	if len(known) == 0 {
		out := make([]GPULink, 0, len(want))
		for _, a := range want {
			out = append(out, GPULink{Index: -1, PCI: a})
		}
		return out, nil
	}
	byPCI := map[string]GPULink{}
	var have []string
	for _, k := range known {
		byPCI[k.PCI] = k
		have = append(have, k.PCI)
	}
	var out []GPULink
	var errs []error
	for _, a := range want {
		k, ok := byPCI[a]
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not a GPU of this node (its GPUs: %s)", a, strings.Join(have, ", ")))
			continue
		}
		out = append(out, k)
	}
	return out, errors.Join(errs...)
}

// resetVerdict reads nvidia-smi's answer: exit 0 is a reset; anything else (the GPU
// in use, not supported, not permitted) fails, with what nvidia-smi said.
func resetVerdict(out cmdOutput) (Status, string) {
	text := strings.TrimSpace(string(out.Stdout))
	if t := out.stderrTail(); t != "" {
		text = strings.TrimSpace(text + " " + t)
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > 400 {
		text = text[:400]
	}
	if out.ExitCode == 0 {
		return StatusPass, text
	}
	return StatusFail, fmt.Sprintf("nvidia-smi exit %d: %s", out.ExitCode, text)
}

func countStatus(ds []DeviceResult, s Status) int {
	n := 0
	for _, d := range ds {
		if d.Status == s {
			n++
		}
	}
	return n
}

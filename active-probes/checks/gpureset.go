package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The gpu-reset check (its metadata: probe/gpureset.go) resets GPUs with nvidia-smi.
// Named addresses must be the node's GPUs when the node's GPUs can be listed (NVML,
// else sysfs); when they cannot, the address format alone is checked, and a request
// naming none leaves the choice to nvidia-smi (which then resets all GPUs).
func init() {
	probe.Implement(probe.GPUResetCheck, func(c probe.Config) probe.Probe {
		return &GPUReset{Path: c.Command("nvidia-smi"), GPUs: defaultLinkSource(c)}
	})
}

// GPUReset is the gpu-reset check.
type GPUReset struct {
	// Path is the nvidia-smi program.
	Path string
	// GPUs lists the node's GPUs (their PCI addresses); nil or an empty answer: not
	// known.
	GPUs LinkSource
}

// Run implements Probe.
func (g *GPUReset) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	want, _ := probe.ParsePCIList(p.String("pci"))
	var known []GPULink
	if g.GPUs != nil {
		known, _ = g.GPUs.GPULinks(ctx) // unknown GPUs: the format check above is all there is
	}
	targets, err := resetTargets(want, known)
	if err != nil {
		return probe.Result{}, err
	}
	if len(targets) == 0 {
		// Nothing to name: nvidia-smi resets every GPU it sees.
		out, err := runCommand(ctx, g.Path, []string{"--gpu-reset"})
		if err != nil {
			return probe.Result{}, err
		}
		st, msg := resetVerdict(out)
		return probe.Result{Status: st, Message: "all GPUs: " + msg}, nil
	}
	var res probe.Result
	for _, t := range targets {
		out, err := runCommand(ctx, g.Path, []string{"--gpu-reset", "-i", t.PCI})
		if err != nil {
			return probe.Result{}, err
		}
		st, msg := resetVerdict(out)
		id := t.PCI
		if t.Index >= 0 {
			id = fmt.Sprint(t.Index)
		}
		res.Devices = append(res.Devices, probe.DeviceResult{ID: id, PCI: t.PCI, Name: t.Name, Status: st, Message: msg})
	}
	res.Status = res.DeviceStatus()
	res.Message = res.Summary()
	if res.Status == probe.StatusPass {
		res.Message = fmt.Sprintf("%d GPU(s) reset", len(res.Devices))
	}
	res.SetValue("gpus_reset", float64(countStatus(res.Devices, probe.StatusPass)))
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
func resetVerdict(out cmdOutput) (probe.Status, string) {
	text := strings.TrimSpace(string(out.Stdout))
	if t := out.stderrTail(); t != "" {
		text = strings.TrimSpace(text + " " + t)
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > 400 {
		text = text[:400]
	}
	if out.ExitCode == 0 {
		return probe.StatusPass, text
	}
	return probe.StatusFail, fmt.Sprintf("nvidia-smi exit %d: %s", out.ExitCode, text)
}

func countStatus(ds []probe.DeviceResult, s probe.Status) int {
	n := 0
	for _, d := range ds {
		if d.Status == s {
			n++
		}
	}
	return n
}

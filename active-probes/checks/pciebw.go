package checks

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The pciebw check (its metadata: probe/pciebw.go) runs cuda/pciebw. The link's
// maximum comes from NVML (or sysfs without NVML), so a link that trained down to x8
// on a x16 GPU fails here even though nvml's own check already flags it; a GPU whose
// link is unknown is judged against the floor alone (4 GB/s by default, the figure IBM
// Autopilot uses).
func init() {
	probe.Implement(probe.PCIeBWCheck, func(c probe.Config) probe.Probe {
		return &PCIeBW{Path: c.Command("pciebw"), Links: defaultLinkSource(c)}
	})
}

// PCIeBW is the pciebw probe.
type PCIeBW struct {
	// Path is the pciebw program (cuda/pciebw).
	Path string
	// Links tells each GPU's PCIe link; nil judges by the floor alone.
	Links LinkSource
}

// Run implements Probe.
func (b *PCIeBW) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	var links []GPULink
	var linkErr error
	if b.Links != nil {
		links, linkErr = b.Links.GPULinks(ctx)
	}
	args := append([]string{"--size-mb", p.String("size_mb"), "--iters", p.String("iters")}, gpuArgs(p)...)
	lines, out, err := runGPUProgram(ctx, "pciebw", b.Path, args)
	if err != nil {
		return probe.Result{}, err
	}

	ratio, floor := p.Float("ratio"), p.Float("floor_gbps")
	var res probe.Result
	slowest, measured := -1.0, 0
	seen := map[string]bool{}
	for _, l := range lines {
		d := l.device()
		link, known := matchLink(links, d.PCI, *l.GPU)
		if d.PCI == "" && known {
			d.PCI = link.PCI
		}
		seen[d.PCI] = true
		if l.Error != "" {
			d.Status, d.Message = probe.StatusFail, "copy failed: "+l.Error
			res.Devices = append(res.Devices, d)
			continue
		}
		if l.H2DGBps == nil || l.D2HGBps == nil {
			d.Status, d.Message = probe.StatusError, "no h2d_gbps/d2h_gbps in the output"
			res.Devices = append(res.Devices, d)
			continue
		}
		h2d, d2h := *l.H2DGBps, *l.D2HGBps
		d.SetValue("h2d_gbps", h2d)
		d.SetValue("d2h_gbps", d2h)
		min := floor
		basis := fmt.Sprintf("the %.1f GB/s floor", floor)
		if known {
			theo := PCIeTheoreticalGBps(link.Link.MaxGen, link.Link.MaxWidth)
			if theo > 0 {
				d.SetValue("link_gbps", theo)
				d.SetValue("pcie_link_gen_max", float64(link.Link.MaxGen))
				d.SetValue("pcie_link_width_max", float64(link.Link.MaxWidth))
				if ratio*theo > min {
					min = ratio * theo
					basis = fmt.Sprintf("%.0f%% of gen%d x%d, %.1f GB/s", ratio*100, link.Link.MaxGen, link.Link.MaxWidth, theo)
				}
			}
		}
		d.SetValue("min_gbps", min)
		var f findings
		if h2d < min || d2h < min {
			f.add(probe.StatusFail, "host-to-device %.1f, device-to-host %.1f GB/s; minimum %.1f GB/s (%s)", h2d, d2h, min, basis)
		}
		measured++
		if slowest < 0 || math.Min(h2d, d2h) < slowest {
			slowest = math.Min(h2d, d2h)
		}
		d.Status, d.Message = f.status(), f.message()
		res.Devices = append(res.Devices, d)
	}
	// A GPU that NVML lists but the program did not measure is missing from CUDA. (Only
	// NVML's list counts: sysfs also shows GPUs this container was not given.)
	if len(p.IntList("gpus")) == 0 {
		for _, gl := range links {
			if gl.PCI != "" && gl.Index >= 0 && !seen[gl.PCI] {
				id := strconv.Itoa(gl.Index)
				res.Devices = append(res.Devices, probe.DeviceResult{ID: id, PCI: gl.PCI, Name: gl.Name, Status: probe.StatusFail,
					Message: "GPU present on PCIe but pciebw did not measure it (not visible to CUDA?)"})
			}
		}
	}
	res.Status = res.DeviceStatus()
	res.Message = res.Summary()
	if slowest >= 0 {
		res.Message = joinMsg(res.Message, fmt.Sprintf("%d GPUs measured, slowest direction %.1f GB/s", measured, slowest))
	}
	noteExit(&res, "pciebw", out)
	if linkErr != nil && len(links) == 0 {
		res.Message = joinMsg(res.Message, "judged against the floor only: "+linkErr.Error())
	}
	return res, nil
}

// matchLink finds the GPU's link by PCI address, or by index when the program printed
// no address and the source knows indices.
func matchLink(links []GPULink, pci string, index int) (GPULink, bool) {
	for _, l := range links {
		if pci != "" && l.PCI == pci {
			return l, true
		}
	}
	if pci == "" {
		for _, l := range links {
			if l.Index == index {
				return l, true
			}
		}
	}
	return GPULink{}, false
}

func joinMsg(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// exitNote says that a program exited non-zero, with its stderr if it wrote any.
func exitNote(prog string, out cmdOutput) string {
	msg := fmt.Sprintf("%s exited %d", prog, out.ExitCode)
	if tail := out.stderrTail(); tail != "" {
		msg += ": " + tail
	}
	return msg
}

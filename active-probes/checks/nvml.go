//go:build cgo

package checks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/faultline-dev/faultline/active-probes/nvmlfield"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The nvml check over the real library (its metadata: probe/nvml.go).
func init() {
	probe.Implement(probe.NVMLCheck, func(c probe.Config) probe.Probe {
		var opts []nvml.LibraryOption
		if c.NVMLLibrary != "" {
			opts = append(opts, nvml.WithLibraryPath(c.NVMLLibrary))
		}
		return &NVML{Lib: nvml.New(opts...)}
	})
}

// NVML is the nvml probe over an NVML implementation: the real library, or go-nvml's
// mock in tests.
type NVML struct {
	Lib nvml.Interface
}

// Run implements Probe.
func (n *NVML) Run(_ context.Context, p probe.Params) (probe.Result, error) {
	expected := p.Int("expected_gpus")
	var res probe.Result
	res.SetValue("gpus_expected", float64(expected))
	if n.Lib == nil {
		return probe.Result{Status: probe.StatusSkipped, Message: probe.NVMLLibraryNotFound}, nil
	}
	if ret := n.Lib.Init(); ret != nvml.SUCCESS {
		status := probe.StatusError
		msg := fmt.Sprintf("NVML init: %v", ret)
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			msg = probe.NVMLLibraryNotFound + ": is the NVIDIA driver installed, and its libnvidia-ml.so.1 visible to this container?"
			if expected == 0 {
				status = probe.StatusSkipped
			}
		}
		if ret == nvml.ERROR_DRIVER_NOT_LOADED && expected > 0 {
			status = probe.StatusFail
			msg = fmt.Sprintf("NVIDIA driver not loaded, %d GPUs expected", expected)
		}
		res.Status, res.Message = status, msg
		return res, nil
	}
	defer n.Lib.Shutdown()

	if v, ret := n.Lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		res.Message = "driver " + v
	}
	count, ret := n.Lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return res, fmt.Errorf("NVML DeviceGetCount: %v", ret)
	}
	res.SetValue("gpu_count", float64(count))
	res.Message = joinMsg(res.Message, fmt.Sprintf("%d GPUs", count))
	for i := 0; i < count; i++ {
		res.Devices = append(res.Devices, n.checkDevice(i, p))
	}

	var node findings
	switch {
	case expected > 0 && count < expected:
		node.add(probe.StatusFail, "found %d GPUs, expected %d", count, expected)
	case expected > 0 && count > expected:
		node.add(probe.StatusWarn, "found %d GPUs, expected only %d", count, expected)
	case count == 0:
		res.Status = probe.StatusSkipped
		res.Message = joinMsg(res.Message, "NVML sees no GPU")
		return res, nil
	}
	res.Status = probe.Worst(node.status(), res.DeviceStatus())
	msg := node.message()
	if s := res.Summary(); s != "" {
		msg = strings.TrimPrefix(msg+"; "+s, "; ")
	}
	if msg != "" {
		res.Message = msg
	}
	return res, nil
}

// checkDevice runs every check on one GPU. A check that NVML does not support on this
// GPU (ECC on a consumer board, retired pages on Ampere) is left out; a GPU that is lost
// fails.
func (n *NVML) checkDevice(i int, p probe.Params) probe.DeviceResult {
	d := probe.DeviceResult{ID: strconv.Itoa(i)}
	var f findings
	dev, ret := n.Lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		st := probe.StatusError
		if ret == nvml.ERROR_GPU_IS_LOST || ret == nvml.ERROR_UNKNOWN {
			st = probe.StatusFail
		}
		d.Status = st
		d.Message = fmt.Sprintf("cannot open GPU %d: %v", i, ret)
		return d
	}
	part := p.String("part")
	guard := func(what string, check func()) {
		defer func() {
			if v := recover(); v != nil {
				f.add(probe.StatusError, "%s: NVML call panicked: %v", what, v)
			}
		}()
		check()
	}
	// only runs the checks of one part (the part parameter), all of them by default.
	only := func(name, what string, check func()) {
		if part == "" || part == probe.NVMLPartAll || part == name {
			guard(what, check)
		}
	}
	guard("identity", func() {
		if v, ret := dev.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = v
		}
		if v, ret := dev.GetName(); ret == nvml.SUCCESS {
			d.Name = v
		}
		if pi, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
			d.PCI = probe.NormalizePCI(cString(pi.BusId[:]))
		}
	})
	lost := false
	call := func(what string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return true
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
			return false
		case nvml.ERROR_GPU_IS_LOST:
			if !lost {
				f.add(probe.StatusFail, "GPU is lost (fallen off the bus?)")
				lost = true
			}
			return false
		}
		f.add(probe.StatusError, "%s: %v", what, ret)
		return false
	}

	only(probe.NVMLPartRemap, "remapped rows", func() {
		corr, unc, pending, failed, ret := dev.GetRemappedRows()
		if !call("GetRemappedRows", ret) {
			return
		}
		d.SetValue("remapped_rows_correctable", float64(corr))
		d.SetValue("remapped_rows_uncorrectable", float64(unc))
		d.SetValue("remap_pending", b2f(pending))
		d.SetValue("remap_failed", b2f(failed))
		if failed {
			f.add(probe.StatusFail, "row remapping failed (%d uncorrectable rows): replace the GPU", unc)
		}
		if pending {
			f.add(probe.StatusFail, "row remapping pending: reset the GPU")
		}
	})
	only(probe.NVMLPartRecovery, "recovery action", func() {
		// Newer drivers say what a GPU needs to recover (nvidia-smi -q's "GPU
		// Reset Status"; Xid 154 in the kernel log); older ones know no such field.
		v, ret := nvmlfield.Uint(dev, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION)
		if !call("GetFieldValues(GPU_RECOVERY_ACTION)", ret) {
			return
		}
		d.SetValue("recovery_action", float64(v))
		switch name, known := nvmlfield.RecoveryAction(v); {
		case !known:
			f.add(probe.StatusWarn, "the driver asks for recovery action %d, which this agent does not know", v)
		case name != nvmlfield.RecoveryNone:
			f.add(probe.StatusFail, "the driver asks for recovery: %s", name)
		}
	})
	only(probe.NVMLPartECC, "ECC", func() {
		v, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		if ret == nvml.ERROR_NOT_SUPPORTED {
			v, ret = dev.GetMemoryErrorCounter(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, nvml.MEMORY_LOCATION_DEVICE_MEMORY)
		}
		if !call("GetTotalEccErrors", ret) {
			return
		}
		d.SetValue("ecc_uncorrected_volatile", float64(v))
		if v > 0 {
			f.add(probe.StatusFail, "%d uncorrectable ECC errors since the driver loaded", v)
		}
	})
	only(probe.NVMLPartRetiredPages, "retired pages", func() {
		st, ret := dev.GetRetiredPagesPendingStatus()
		if !call("GetRetiredPagesPendingStatus", ret) {
			return
		}
		d.SetValue("retired_pages_pending", b2f(st == nvml.FEATURE_ENABLED))
		if st == nvml.FEATURE_ENABLED {
			f.add(probe.StatusFail, "retired pages pending: reset the GPU")
		}
	})
	var reasons uint64
	haveReasons := false
	clocks := probe.NVMLPartClocks
	if part == probe.NVMLPartPCIe {
		clocks = part
	}
	only(clocks, "clock event reasons", func() {
		r, ret := dev.GetCurrentClocksEventReasons()
		if ret == nvml.ERROR_FUNCTION_NOT_FOUND || ret == nvml.ERROR_NOT_SUPPORTED {
			r, ret = dev.GetCurrentClocksThrottleReasons() // drivers before r535
		}
		if !call("GetCurrentClocksEventReasons", ret) {
			return
		}
		reasons, haveReasons = r, true
		if part == probe.NVMLPartPCIe {
			return // read only to tell an idle GPU's lowered link generation
		}
		d.SetValue("clock_event_reasons", float64(r))
		hw := r&nvml.ClocksThrottleReasonHwSlowdown != 0
		thermal := r&nvml.ClocksThrottleReasonHwThermalSlowdown != 0
		brake := r&nvml.ClocksThrottleReasonHwPowerBrakeSlowdown != 0
		d.SetValue("hw_slowdown", b2f(hw))
		d.SetValue("hw_thermal_slowdown", b2f(thermal))
		d.SetValue("hw_power_brake", b2f(brake))
		d.SetValue("sw_thermal_slowdown", b2f(r&nvml.ClocksEventReasonSwThermalSlowdown != 0))
		action := actionStatus(p.String("throttle_action"))
		switch {
		case thermal:
			f.add(action, "HW thermal slowdown: the GPU is overheating")
		case brake:
			f.add(probe.StatusWarn, "HW power brake slowdown: the chassis asserted the power brake")
		case hw:
			f.add(action, "HW slowdown (power draw or temperature too high)")
		}
		if r&nvml.ClocksEventReasonSwThermalSlowdown != 0 {
			f.add(probe.StatusWarn, "SW thermal slowdown: clocks lowered to stay under the temperature limit")
		}
	})
	only(probe.NVMLPartPCIe, "PCIe link", func() {
		gen, r1 := dev.GetCurrPcieLinkGeneration()
		width, r2 := dev.GetCurrPcieLinkWidth()
		maxGen, r3 := dev.GetMaxPcieLinkGeneration()
		maxWidth, r4 := dev.GetMaxPcieLinkWidth()
		if !call("GetCurrPcieLinkGeneration", r1) || !call("GetCurrPcieLinkWidth", r2) ||
			!call("GetMaxPcieLinkGeneration", r3) || !call("GetMaxPcieLinkWidth", r4) {
			return
		}
		d.SetValue("pcie_link_gen", float64(gen))
		d.SetValue("pcie_link_width", float64(width))
		d.SetValue("pcie_link_gen_max", float64(maxGen))
		d.SetValue("pcie_link_width_max", float64(maxWidth))
		d.SetValue("pcie_link_max_gbps", PCIeTheoreticalGBps(maxGen, maxWidth))
		if width > 0 && maxWidth > 0 && width < maxWidth {
			if st := actionStatus(p.String("pcie_width_action")); st != probe.StatusPass {
				f.add(st, "PCIe link x%d, expected x%d", width, maxWidth)
			}
		}
		if gen > 0 && maxGen > 0 && gen < maxGen {
			idle := haveReasons && reasons&nvml.ClocksEventReasonGpuIdle != 0
			if st := actionStatus(p.String("pcie_gen_action")); st != probe.StatusPass && !idle {
				f.add(st, "PCIe link gen%d, expected gen%d", gen, maxGen)
			}
		}
	})
	only(probe.NVMLPartNVLink, "NVLink", func() {
		up, down := 0, []string{}
		for l := 0; l < probe.MaxNVLinks; l++ {
			st, ret := dev.GetNvLinkState(l)
			switch ret {
			case nvml.SUCCESS:
			case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_FUNCTION_NOT_FOUND:
				continue // no such link on this GPU
			default:
				call(fmt.Sprintf("GetNvLinkState(%d)", l), ret)
				continue
			}
			if st == nvml.FEATURE_ENABLED {
				up++
			} else {
				down = append(down, strconv.Itoa(l))
			}
		}
		want := p.Int("expected_nvlinks")
		if up == 0 && len(down) == 0 {
			// No NVLink: every link NOT_SUPPORTED, as NVML answered on an H200 whose
			// links the machine did not expose. A GPU expected to have them fails.
			if want > 0 {
				f.add(probe.StatusFail, "0 of %d NVLinks up: NVML reports no NVLink on this GPU", want)
			}
			return
		}
		d.SetValue("nvlink_up", float64(up))
		d.SetValue("nvlink_down", float64(len(down)))
		switch {
		case want > 0 && up < want:
			f.add(probe.StatusFail, "%d of %d NVLinks up (down: %s)", up, want, strings.Join(down, ","))
		case want == 0 && up > 0 && len(down) > 0:
			f.add(probe.StatusFail, "NVLink %s down (%d up)", strings.Join(down, ","), up)
		case want == 0 && up == 0:
			f.add(probe.StatusWarn, "all %d NVLinks down", len(down))
		}
	})
	d.Status = f.status()
	d.Message = f.message()
	return d
}

// actionStatus maps a *_action parameter to the status it gives (ignore is a pass).
func actionStatus(a string) probe.Status {
	switch a {
	case "fail":
		return probe.StatusFail
	case "warn":
		return probe.StatusWarn
	}
	return probe.StatusPass
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// cString reads a NUL-terminated C string out of a fixed array.
func cString[T ~int8 | ~uint8](b []T) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// NVMLLinks is a LinkSource reading the GPUs' PCIe links from NVML.
type NVMLLinks struct {
	Lib nvml.Interface
}

// GPULinks implements LinkSource.
func (n NVMLLinks) GPULinks(context.Context) (links []GPULink, err error) {
	if n.Lib == nil {
		return nil, errors.New(probe.NVMLLibraryNotFound)
	}
	if ret := n.Lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, errors.New(probe.NVMLLibraryNotFound)
		}
		return nil, fmt.Errorf("NVML init: %v", ret)
	}
	defer n.Lib.Shutdown()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("NVML call panicked: %v", v)
		}
	}()
	count, ret := n.Lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML DeviceGetCount: %v", ret)
	}
	for i := 0; i < count; i++ {
		dev, ret := n.Lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		gl := GPULink{Index: i}
		if pi, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
			gl.PCI = probe.NormalizePCI(cString(pi.BusId[:]))
		}
		if name, ret := dev.GetName(); ret == nvml.SUCCESS {
			gl.Name = name
		}
		gl.Link.Gen, _ = dev.GetCurrPcieLinkGeneration()
		gl.Link.Width, _ = dev.GetCurrPcieLinkWidth()
		gl.Link.MaxGen, _ = dev.GetMaxPcieLinkGeneration()
		gl.Link.MaxWidth, _ = dev.GetMaxPcieLinkWidth()
		links = append(links, gl)
	}
	return links, nil
}

// defaultLinkSource is NVML, then sysfs.
func defaultLinkSource(c probe.Config) LinkSource {
	var opts []nvml.LibraryOption
	if c.NVMLLibrary != "" {
		opts = append(opts, nvml.WithLibraryPath(c.NVMLLibrary))
	}
	return firstLinks{NVMLLinks{Lib: nvml.New(opts...)}, SysfsLinks{Root: c.SysfsRoot}}
}

// Package autopilot is faultline's compatibility with IBM Autopilot, turned on per
// install (the controller's --autopilot-compat): Autopilot's check names as aliases
// of faultline's checks, the node labels Autopilot writes with its values, and the
// set and interval of its periodic deep checks. It holds what these are; the
// controller's triggers (controller/trigger) run the checks and write the labels.
package autopilot

import (
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/proberun"
)

// alias is one of Autopilot's check names and the faultline check, with
// parameters, that stands for it.
type alias struct {
	name   string
	check  string
	params probe.Params
}

// aliases is the one table of Autopilot's check names that are not faultline's
// (pciebw, dcgm, ping and pvc are the same name in both). Autopilot's
// documentation says: remapped reads the GPUs' remapped rows from nvidia-smi,
// gpumem measures memory bandwidth with DAXPY and DGEMM, gpupower checks whether
// power throttling is active, iperf measures network bandwidth with iperf3.
// The GPU count is not compared by the nvml parts (expected_gpus 0), as
// Autopilot's checks do not count GPUs.
var aliases = []alias{
	{name: "remapped", check: probe.NVMLCheck, params: probe.Params{"part": probe.NVMLPartRemap, "expected_gpus": "0"}},
	{name: "gpumem", check: probe.DGEMMCheck},
	{name: "gpupower", check: probe.NVMLCheck, params: probe.Params{"part": probe.NVMLPartClocks, "expected_gpus": "0"}},
	{name: "iperf", check: probe.Iperf3Check},
}

// Aliases returns the table for the dispatcher (proberun.Config.Aliases).
func Aliases() map[string]proberun.Alias {
	out := make(map[string]proberun.Alias, len(aliases))
	for _, a := range aliases {
		out[a.name] = proberun.Alias{Check: a.check, Params: a.params.Clone()}
	}
	return out
}

//go:build cgo

package demo

import (
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/faultline-dev/faultline/active-probes/checks"
	"github.com/faultline-dev/faultline/active-probes/checks/nvmlmock"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// demoRegistry is the default probes with nvml reading a healthy DGX A100 mock; once
// lost is set, the mock's last GPU has fallen off the bus (NVML counts seven).
func demoRegistry(lost *atomic.Bool) *probe.Registry {
	srv := nvmlmock.HealthyDGXA100()
	srv.DeviceGetCountFunc = func() (int, nvml.Return) {
		if lost.Load() {
			return len(srv.Devices) - 1, nvml.SUCCESS
		}
		return len(srv.Devices), nvml.SUCCESS
	}
	reg := probe.NewRegistry()
	for _, s := range probe.Default().List() {
		if s.Name == "nvml" {
			s.New = func(probe.Config) probe.Probe { return &checks.NVML{Lib: srv} }
		}
		reg.MustRegister(s)
	}
	return reg
}

// nvmlSource says where the demo's GPUs come from.
const nvmlSource = "go-nvml's DGX A100 mock (8 × A100-SXM4-80GB per node)"

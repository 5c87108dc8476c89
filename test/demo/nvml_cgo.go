//go:build cgo

package demo

import (
	"github.com/faultline-dev/faultline/active-probes/checks"
	"github.com/faultline-dev/faultline/active-probes/checks/nvmlmock"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// demoRegistry is the default probes with nvml reading a healthy DGX A100 mock.
func demoRegistry() *probe.Registry {
	reg := probe.NewRegistry()
	for _, s := range probe.Default().List() {
		if s.Name == "nvml" {
			s.New = func(probe.Config) probe.Probe { return &checks.NVML{Lib: nvmlmock.HealthyDGXA100()} }
		}
		reg.MustRegister(s)
	}
	return reg
}

// nvmlSource says where the demo's GPUs come from.
const nvmlSource = "go-nvml's DGX A100 mock (8 × A100-SXM4-80GB per node)"

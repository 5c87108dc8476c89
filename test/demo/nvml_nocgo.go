//go:build !cgo

package demo

import (
	"sync/atomic"

	// The node checks' implementations, which the demo's agents run.
	_ "github.com/faultline-dev/faultline/active-probes/checks"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// demoRegistry is the default probes; without cgo there is no NVML mock and the nvml
// check says so (make demo builds with cgo), so no GPU can be lost either.
func demoRegistry(*atomic.Bool) *probe.Registry {
	reg := probe.NewRegistry()
	for _, s := range probe.Default().List() {
		reg.MustRegister(s)
	}
	return reg
}

const nvmlSource = "none (built without cgo: the nvml check reports skipped; make demo builds with cgo)"

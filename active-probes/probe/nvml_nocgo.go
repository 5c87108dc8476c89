//go:build !cgo

package probe

import (
	"context"
	"time"
)

// Without cgo there are no NVML bindings: the nvml probe registers and reports that it
// cannot look, and pciebw reads PCIe links from sysfs only.
func init() {
	Register(Spec{
		Name:           "nvml",
		Help:           "GPU health from NVML (this build has no NVML bindings: built without cgo)",
		DefaultEnabled: true,
		DefaultTimeout: 30 * time.Second,
		Params:         nvmlParams,
		New:            func(Config) Probe { return nvmlUnavailable{} },
	})
}

// NVMLLibraryNotFound is the message of the result on a node without libnvidia-ml.
const NVMLLibraryNotFound = "NVML library not found"

type nvmlUnavailable struct{}

func (nvmlUnavailable) Name() string { return "nvml" }

func (nvmlUnavailable) Run(context.Context, Params) (Result, error) {
	return Result{Status: StatusSkipped, Message: NVMLLibraryNotFound + " (built without cgo)"}, nil
}

func defaultLinkSource(c Config) LinkSource { return SysfsLinks{Root: c.SysfsRoot} }

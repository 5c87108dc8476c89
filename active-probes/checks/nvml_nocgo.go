//go:build !cgo

package checks

import (
	"context"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// Without cgo there are no NVML bindings: the nvml check reports that it cannot look,
// and pciebw reads PCIe links from sysfs only.
func init() {
	probe.Implement(probe.NVMLCheck, func(probe.Config) probe.Probe { return nvmlUnavailable{} })
}

type nvmlUnavailable struct{}

func (nvmlUnavailable) Run(context.Context, probe.Params) (probe.Result, error) {
	return probe.Result{Status: probe.StatusSkipped, Message: probe.NVMLLibraryNotFound + " (built without cgo)"}, nil
}

func defaultLinkSource(c probe.Config) LinkSource { return SysfsLinks{Root: c.SysfsRoot} }

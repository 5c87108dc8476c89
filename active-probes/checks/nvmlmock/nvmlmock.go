//go:build cgo

// Package nvmlmock completes go-nvml's DGX A100 mock (pkg/nvml/mock/dgxa100) into a
// healthy machine for the nvml probe: the tests inject faults into it, and the local
// demo's probe agents run on it, since no GPU is there.
package nvmlmock

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// PCI are the PCI addresses of a DGX A100's eight GPUs, as NVML prints them.
var PCI = []string{"00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
	"00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0"}

// HealthyDGXA100 returns the DGX A100 mock with every function the nvml probe calls set
// to a healthy A100: gen4 x16, 12 NVLinks up, no remaps, no ECC errors, busy clocks.
// (dgxa100 leaves these nil; a nil one panics when called.)
func HealthyDGXA100() *dgxa100.Server {
	srv := dgxa100.New()
	for i, dd := range srv.Devices {
		d := dd.(*dgxa100.Device)
		d.Name = "NVIDIA A100-SXM4-80GB"
		d.PciBusID = PCI[i]
		busID := PCI[i]
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			copy(p.BusId[:], busID)
			p.PciDeviceId = 0x20B210DE
			return p, nvml.SUCCESS
		}
		d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.SUCCESS }
		d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return 0, nvml.SUCCESS }
		d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED // Ampere remaps rows instead
		}
		d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksEventReasonNone, nvml.SUCCESS }
		d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 4, nvml.SUCCESS }
		d.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 16, nvml.SUCCESS }
		d.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return 4, nvml.SUCCESS }
		d.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return 16, nvml.SUCCESS }
		// An A100 on R550 knows no GPU recovery action field (newer drivers do).
		d.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
			for i := range values {
				values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
			return nvml.SUCCESS
		}
		d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
			if link >= 12 {
				return 0, nvml.ERROR_INVALID_ARGUMENT // A100 has 12 links
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
	}
	return srv
}

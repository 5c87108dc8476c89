package probe

import "time"

// The nvml check reads each GPU's health from NVML without loading it: the GPU count,
// row remapping, volatile uncorrectable ECC errors, pending page retirements, clock
// slowdowns, PCIe link degradation, NVLink state and, on newer drivers, the recovery
// action the driver asks for. It moves no data and takes well
// under a second, so it is enabled by default.
func init() {
	Register(Spec{
		Name:           NVMLCheck,
		Help:           "GPU health from NVML: count, row remapping, volatile ECC, retired pages, HW slowdown, PCIe link, NVLink, recovery action",
		DefaultEnabled: true,
		DefaultTimeout: 30 * time.Second,
		Params: Schema{
			{Name: "expected_gpus", Type: TypeInt, Default: "0", Min: 0, Max: 64, FromCapacity: "nvidia.com/gpu",
				Help: "GPUs the node must have; fewer fails the check (0: do not check; not given: the node's nvidia.com/gpu capacity when the controller runs it)"},
			{Name: "expected_nvlinks", Type: TypeInt, Default: "0", Min: 0, Max: MaxNVLinks,
				Help: "NVLinks that must be up on each GPU (0: any link down while others are up fails)"},
			{Name: "pcie_width_action", Type: TypeEnum, Default: "fail", Enum: []string{"fail", "warn", "ignore"},
				Help: "verdict for a PCIe link narrower than its maximum (x8 on a x16 GPU)"},
			{Name: "pcie_gen_action", Type: TypeEnum, Default: "warn", Enum: []string{"fail", "warn", "ignore"},
				Help: "verdict for a busy GPU whose link runs below its maximum generation (an idle GPU lowers it to save power)"},
			{Name: "throttle_action", Type: TypeEnum, Default: "fail", Enum: []string{"fail", "warn", "ignore"},
				Help: "verdict for a hardware slowdown (thermal or unexplained); a power brake alone is a warn"},
			{Name: "part", Type: TypeEnum, Default: NVMLPartAll, Enum: NVMLParts,
				Help: "what to read of each GPU: all, or one part alone (remap: row remapping, ecc, retired_pages, clocks: slowdowns and power brake, pcie, nvlink, recovery: the recovery action the driver asks for); the GPU count is compared either way"},
		},
	})
}

// NVMLCheck is the nvml check's name.
const NVMLCheck = "nvml"

// The values of the nvml check's part parameter: all of a GPU's health, or one part
// of it alone (Autopilot's remapped and gpupower checks are the remap and clocks
// parts).
const (
	NVMLPartAll          = "all"
	NVMLPartRemap        = "remap"
	NVMLPartECC          = "ecc"
	NVMLPartRetiredPages = "retired_pages"
	NVMLPartClocks       = "clocks"
	NVMLPartPCIe         = "pcie"
	NVMLPartNVLink       = "nvlink"
	NVMLPartRecovery     = "recovery"
)

// NVMLParts lists the part parameter's values.
var NVMLParts = []string{NVMLPartAll, NVMLPartRemap, NVMLPartECC, NVMLPartRetiredPages, NVMLPartClocks, NVMLPartPCIe, NVMLPartNVLink, NVMLPartRecovery}

// MaxNVLinks is NVML's NVLINK_MAX_LINKS (links per GPU).
const MaxNVLinks = 18

// NVMLLibraryNotFound is the message of the nvml check's result on a node without
// libnvidia-ml.
const NVMLLibraryNotFound = "NVML library not found"

package probe

// maxNVLinks is NVML's NVLINK_MAX_LINKS (links per GPU).
const maxNVLinks = 18

// nvmlParams is the nvml probe's schema; it is the same with and without cgo so that a
// request valid on one build is valid on the other.
var nvmlParams = Schema{
	{Name: "expected_gpus", Type: TypeInt, Default: "0", Min: 0, Max: 64,
		Help: "GPUs the node must have; fewer fails the check (0: do not check)"},
	{Name: "expected_nvlinks", Type: TypeInt, Default: "0", Min: 0, Max: maxNVLinks,
		Help: "NVLinks that must be up on each GPU (0: any link down while others are up fails)"},
	{Name: "pcie_width_action", Type: TypeEnum, Default: "fail", Enum: []string{"fail", "warn", "ignore"},
		Help: "verdict for a PCIe link narrower than its maximum (x8 on a x16 GPU)"},
	{Name: "pcie_gen_action", Type: TypeEnum, Default: "warn", Enum: []string{"fail", "warn", "ignore"},
		Help: "verdict for a busy GPU whose link runs below its maximum generation (an idle GPU lowers it to save power)"},
	{Name: "throttle_action", Type: TypeEnum, Default: "fail", Enum: []string{"fail", "warn", "ignore"},
		Help: "verdict for a hardware slowdown (thermal or unexplained); a power brake alone is a warn"},
}

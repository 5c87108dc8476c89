package probe

import "time"

// The dcgm check runs NVIDIA DCGM's diagnostic, `dcgmi diag -r <level> -j`. Level 1
// (deployment checks, seconds) is harmless; level 2 (PCIe, memory and a short stress,
// about 2 minutes) and level 3 (long stress, about 30 minutes) allocate most of each
// GPU's memory and load it fully, so they are invasive: run on a workload, they would
// both disturb it and fail for lack of memory.
func init() {
	Register(Spec{
		Name:           DCGMCheck,
		Help:           "NVIDIA DCGM diagnostic (dcgmi diag -r 1|2|3 -j), per GPU",
		DefaultTimeout: 3 * time.Minute,
		TimeoutFor: func(p Params) time.Duration {
			switch p.Int("level") {
			case 2:
				return 15 * time.Minute
			case 3:
				return 60 * time.Minute
			}
			return 3 * time.Minute
		},
		InvasiveFor: func(p Params) bool { return p.Int("level") >= dcgmInvasiveLevel },
		Params: Schema{
			{Name: "level", Type: TypeInt, Default: "1", Min: 1, Max: 3,
				Help: "diagnostic level: 1 quick (seconds), 2 medium (~2 min, invasive), 3 long (~30 min, invasive)"},
			gpusParam,
			{Name: "host", Type: TypeHostPort, Target: TargetHostengine, Help: "nv-hostengine to use (host or host:port, an allowed hostengine; default: dcgmi's own, localhost)"},
			{Name: "ignore_errors", Type: TypeIntList, Min: 0, Max: 1000,
				Help: "DCGM error ids (dcgm_errors.h) that do not count: a test failing only with these passes"},
		},
	})
}

// DCGMCheck is the dcgm check's name.
const DCGMCheck = "dcgm"

// dcgmInvasiveLevel is the first diagnostic level that loads the GPUs.
const dcgmInvasiveLevel = 2

// gpusParam is the "gpus" parameter shared by the GPU checks.
var gpusParam = ParamSpec{Name: "gpus", Type: TypeIntList, Min: 0, Max: 63, MaxItems: 64,
	Help: "GPU indices to test, comma-separated (default: all)"}

package probe

import "time"

// The pciebw check runs cuda/pciebw, which copies pinned host memory to and from each
// GPU and prints the bandwidth per direction, and compares it with what the GPU's PCIe
// link should carry. A GPU fails when either direction is below
//
//	max(floor_gbps, ratio × theoretical rate of the link at its maximum gen and width)
//
// Invasive: it saturates the PCIe links for a few seconds.
func init() {
	Register(Spec{
		Name:           PCIeBWCheck,
		Help:           "host<->GPU bandwidth over PCIe (pinned memcpy), per GPU, against the link's theoretical rate",
		DefaultTimeout: 2 * time.Minute,
		Invasive:       true,
		Params: Schema{
			{Name: "size_mb", Type: TypeInt, Default: "256", Min: 1, Max: 4096, Help: "size of each copy in MiB"},
			{Name: "iters", Type: TypeInt, Default: "20", Min: 1, Max: 1000, Help: "timed copies per direction"},
			gpusParam,
			{Name: "ratio", Type: TypeFloat, Default: "0.5", Min: 0.05, Max: 1,
				Help: "fraction of the link's theoretical rate each direction must reach"},
			{Name: "floor_gbps", Type: TypeFloat, Default: "4", Min: 0, Max: 1000,
				Help: "absolute minimum GB/s per direction (the only one when the link is unknown)"},
		},
	})
}

// PCIeBWCheck is the pciebw check's name.
const PCIeBWCheck = "pciebw"

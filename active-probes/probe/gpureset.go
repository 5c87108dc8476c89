package probe

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The gpu-reset check resets GPUs through the driver's tool, `nvidia-smi --gpu-reset
// -i <pci>`, one GPU at a time: the escalation ladder's gpu-reset step asks for it
// before re-running the rule's confirming probe. A reset kills every context on the
// GPU, so the check is invasive: the agent runs it only when no container holds a GPU
// device (or with force) and under the probing taint. The driver refuses a GPU that a
// process still uses; nvidia-smi then exits non-zero and the GPU fails the check.
//
// The GPUs are named by PCI address ("pci"); none named resets every GPU of the node.
func init() {
	Register(Spec{
		Name:           GPUResetCheck,
		Help:           "reset idle GPUs with nvidia-smi --gpu-reset (by PCI address; default: all of the node's)",
		DefaultTimeout: 2 * time.Minute,
		Invasive:       true,
		Params: Schema{
			{Name: "pci", Type: TypeString, Check: checkPCIList,
				Help: "PCI addresses of the GPUs to reset, comma-separated (0000:3b:00.0; default: all of the node's)"},
		},
	})
}

// GPUResetCheck is the gpu-reset check's name.
const GPUResetCheck = "gpu-reset"

// maxResetGPUs bounds the addresses one request names (a node has at most a few
// dozen GPUs).
const maxResetGPUs = 64

// checkPCIList accepts a comma-separated list of at most maxResetGPUs PCI addresses.
func checkPCIList(v string) error {
	_, err := ParsePCIList(v)
	return err
}

// ParsePCIList reads the gpu-reset check's "pci" parameter: the addresses it names,
// normalized, each once.
func ParsePCIList(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	fields := strings.Split(v, ",")
	if len(fields) > maxResetGPUs {
		return nil, fmt.Errorf("more than %d addresses", maxResetGPUs)
	}
	out := make([]string, 0, len(fields))
	seen := map[string]bool{}
	for _, f := range fields {
		a := NormalizePCI(f)
		if a == "" {
			return nil, fmt.Errorf("%q is not a PCI address (domain:bus:device.function, e.g. 0000:3b:00.0)", strings.TrimSpace(f))
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// NormalizePCI turns the forms NVML, CUDA and sysfs print (00000000:3B:00.0,
// 0000:3b:00.0, 3b:00.0) into domain:bus:device.function with a 4-digit domain, lower
// case. It returns "" for something that is not a PCI address.
func NormalizePCI(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "\x00")
	parts := strings.Split(s, ":")
	var dom, bus, devfn string
	switch len(parts) {
	case 3:
		dom, bus, devfn = parts[0], parts[1], parts[2]
	case 2:
		dom, bus, devfn = "0", parts[0], parts[1]
	default:
		return ""
	}
	dev, fn, ok := strings.Cut(devfn, ".")
	if !ok {
		fn = "0"
	}
	d, err1 := strconv.ParseUint(dom, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 16, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || v > 0x1f || f > 7 {
		return ""
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f)
}

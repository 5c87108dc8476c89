// Package checks holds the implementations of the node checks that package probe
// describes: NVML (go-nvml, cgo), the CUDA programs (pciebw, dgemm), dcgmi, iperf3,
// ping and nvidia-smi's GPU reset. One check per file; each file's init gives
// probe.Implement the constructor of the check whose metadata (name, parameters,
// where it runs) probe registers. Only the probe agent links this package: the
// controller knows the checks by their metadata alone and asks the agents to run them.
//
// The programs run with exec.CommandContext and an argument vector, never through a
// shell; probe.Config.Commands sets the path of each program.
package checks

import (
	"fmt"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// resolve fills in and validates a check's parameters against its registered schema
// (a Runner resolves them before Run; a caller of Run directly may not have).
func resolve(check string, p probe.Params) (probe.Params, error) {
	s, ok := probe.Default().Get(check)
	if !ok {
		return nil, fmt.Errorf("%w: %s", probe.ErrUnknownProbe, check)
	}
	return s.Params.Resolve(p)
}

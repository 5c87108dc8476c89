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

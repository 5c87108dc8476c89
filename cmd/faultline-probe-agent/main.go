// Command faultline-probe-agent is faultline's probe agent: it runs on every GPU node
// and runs the active probes (NVML, the CUDA programs, DCGM, iperf3, ping, GPU reset)
// when the controller or an admin asks, over an authenticated HTTP API, and, with
// --nvml-events, ships the GPUs' NVML events as log lines. It is a program of its own
// because it links go-nvml (cgo): the faultline binary (controller, exporter, CLI)
// links neither NVML nor the checks' implementations, and the agent nothing of the
// controller.
package main

import (
	// The node checks' implementations: each registers itself with package probe.
	_ "github.com/faultline-dev/faultline/active-probes/checks"
	"github.com/faultline-dev/faultline/internal/cli"
)

func main() { cli.Main("faultline-probe-agent", newRoot()) }

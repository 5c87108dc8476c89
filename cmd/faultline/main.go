// Command faultline finds sick GPU nodes from their logs: the controller, the
// dmesg-exporter and the command-line tools, a subcommand each. The probe agent, which
// links NVML, is its own program (cmd/faultline-probe-agent).
package main

import (
	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/internal/buildinfo"
	"github.com/faultline-dev/faultline/internal/cli"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "faultline",
		Short: "Find sick GPU nodes from their logs and take them out of scheduling",
		Long: `faultline matches kernel and training-pod logs against YAML rule packs
(NVIDIA Xid, NVSwitch SXid, PCIe AER, link flaps, storage, NCCL/CUDA errors),
and taints faulty nodes. 'faultline scan' runs the same packs over any log file.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Version(),
	}
	root.AddCommand(newScanCmd(), newRulesCmd(), newExporterCmd(), newControllerCmd(), newUntaintCmd(), newFaultCmd(), newProbeCmd(), newReplayCmd())
	return root
}

func main() { cli.Main("faultline", newRoot()) }

// Command faultline finds sick GPU nodes from their logs: the controller, the
// dmesg-exporter and the command-line tools, a subcommand each. The probe agent, which
// links NVML, is its own program (cmd/faultline-probe-agent).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/internal/buildinfo"
)

// exitError carries a process exit code out of a command without printing usage.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "faultline:", err)
		os.Exit(1)
	}
}

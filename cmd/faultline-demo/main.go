// Command faultline-demo runs faultline's main job on this machine with the real
// components, and narrates it (make demo). It is its own program, not a faultline
// subcommand, so that the production binary carries neither the test harness that
// starts etcd, kube-apiserver and Loki nor the testing package.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/internal/buildinfo"
	"github.com/faultline-dev/faultline/test/demo"
)

func newRoot() *cobra.Command {
	var o demo.Options
	cmd := &cobra.Command{
		Use:   "faultline-demo",
		Short: "Run faultline's main job on this machine with real components, and narrate it",
		Long: `Starts etcd + kube-apiserver, Grafana Loki and the OpenTelemetry Collector on
127.0.0.1 (built once from pinned versions and cached), registers simulated GPU nodes,
runs a dmesg-exporter and a probe agent per node and the controller, then plays a
scenario: an Xid 79 (taint), an Xid 13 (Event only) and a flapping link (a confirming
probe, then the decision). It stays up until Ctrl-C and cleans up everything it
started. --once plays the scenario, checks every outcome and exits 0 only if all held.
The exporters and the controller run as processes of the faultline binary (--faultline).
Run it from a faultline checkout (make demo).`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Version(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out = cmd.OutOrStdout()
			return demo.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Once, "once", false, "play the scenario, check every outcome, print a summary and exit")
	cmd.Flags().IntVar(&o.Nodes, "nodes", demo.DefaultNodes, "simulated GPU nodes (at least 4)")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "keep data and logs here (default: a temporary directory, removed at the end)")
	cmd.Flags().DurationVar(&o.StepTimeout, "step-timeout", 0, "longest wait for each outcome (default 90s)")
	cmd.Flags().StringVar(&o.Binary, "faultline", "", "the faultline binary the exporters and the controller run as (default: the one next to this program, else on $PATH)")
	return cmd
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultline-demo:", err)
		os.Exit(1)
	}
}

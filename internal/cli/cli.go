// Package cli runs the root command of one of faultline's programs: an interrupt or
// SIGTERM cancels its context, an ExitError sets the exit status without a message,
// any other error is printed with the program's name and exits 1.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// ExitError carries a process exit status out of a command that has already said
// what it found (a scan that matched, a check that failed).
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Main executes root and exits the process with its status.
func Main(name string, root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.ExecuteContext(ctx)
	stop()
	var ee ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.Code)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

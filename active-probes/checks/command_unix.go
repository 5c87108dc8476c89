//go:build unix

package checks

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the program in a process group of its own and returns a
// function that kills the whole group.
func setProcessGroup(cmd *exec.Cmd) (kill func() error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return func() error {
		if cmd.Process == nil {
			return nil
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}

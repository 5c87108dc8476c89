//go:build !unix

package checks

import "os/exec"

// setProcessGroup: where process groups do not exist, killing means killing the program.
func setProcessGroup(cmd *exec.Cmd) (kill func() error) {
	return func() error {
		if cmd.Process == nil {
			return nil
		}
		return cmd.Process.Kill()
	}
}

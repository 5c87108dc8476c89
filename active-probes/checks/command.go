package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// maxOutput caps what a probe keeps of a program's stdout and of its stderr.
const maxOutput = 16 << 20

// cmdOutput is what a program printed and how it ended.
type cmdOutput struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int // -1 when killed by a signal
}

// stderrTail returns the last lines of stderr, for messages.
func (o cmdOutput) stderrTail() string {
	s := strings.TrimSpace(string(o.Stderr))
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	s = strings.Join(lines, " | ")
	if len(s) > 800 {
		s = s[len(s)-800:]
	}
	return s
}

// runCommand runs the program at path with args, without a shell. A non-zero exit is not
// an error (dcgmi and ping report verdicts through their exit codes): it is returned in
// ExitCode. The error is for a program that cannot be started, or that was stopped
// because ctx ended. The program runs in its own process group, which is killed when ctx
// ends, so helpers it started (dcgmi's nvvs) do not outlive it.
func runCommand(ctx context.Context, path string, args []string, env ...string) (cmdOutput, error) {
	var out cmdOutput
	cmd := exec.CommandContext(ctx, path, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout := &limitedBuffer{max: maxOutput}
	stderr := &limitedBuffer{max: maxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Cancel = setProcessGroup(cmd)
	cmd.WaitDelay = 3 * time.Second
	err := cmd.Run()
	out.Stdout, out.Stderr = stdout.Bytes(), stderr.Bytes()
	if cmd.ProcessState != nil {
		out.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err == nil {
		return out, nil
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("%s: stopped: %w", path, ctx.Err())
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out, nil
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return out, fmt.Errorf("%s: program not found (set its path in the probe configuration): %w", path, err)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return out, nil // exited; a child kept its output open
	}
	return out, fmt.Errorf("%s: %w", path, err)
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if room <= 0 {
		b.truncated = true
		return len(p), nil
	}
	if len(p) > room {
		b.buf.Write(p[:room])
		b.truncated = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) Bytes() []byte { return b.buf.Bytes() }

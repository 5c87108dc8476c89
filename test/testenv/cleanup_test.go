package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/test/eventually"
)

// snapshot records pid and start time of each process so that a reused pid is not
// mistaken for a survivor.
type snapshot map[string]struct {
	pid   int
	start uint64
}

func takeSnapshot(t *testing.T, pids map[string]int) snapshot {
	t.Helper()
	s := snapshot{}
	for name, pid := range pids {
		st, ok := procStat(pid)
		if !ok || st.state == "Z" {
			t.Fatalf("%s (pid %d) is not running before cleanup", name, pid)
		}
		s[name] = struct {
			pid   int
			start uint64
		}{pid, st.start}
	}
	return s
}

// waitAllGone fails unless every process in s has exited within timeout.
func waitAllGone(t *testing.T, s snapshot, timeout time.Duration) {
	t.Helper()
	eventually.NoError(t, timeout, "every process gone after cleanup", func() error {
		var alive []string
		for name, p := range s {
			if processAlive(p.pid, p.start) {
				alive = append(alive, fmt.Sprintf("%s (pid %d)", name, p.pid))
			}
		}
		if len(alive) > 0 {
			sort.Strings(alive)
			return fmt.Errorf("still running: %s", strings.Join(alive, ", "))
		}
		return nil
	})
}

func TestCleanupLeavesNoOrphans(t *testing.T) {
	Integration(t)
	var snap snapshot
	t.Run("env", func(t *testing.T) {
		env := Start(t, Options{Kubernetes: true, Collector: true, Prometheus: &PrometheusOptions{}})
		snap = takeSnapshot(t, env.processIDs())
		names := make([]string, 0, len(snap))
		for n, p := range snap {
			names = append(names, fmt.Sprintf("%s=%d", n, p.pid))
		}
		sort.Strings(names)
		t.Logf("running: %s", strings.Join(names, " "))
	})
	if len(snap) < 10 { // 5 components, each with a watchdog
		t.Fatalf("expected 10 processes, got %d: %v", len(snap), snap)
	}
	// The subtest's cleanup has run: nothing may be left, not even for a moment.
	waitAllGone(t, snap, 0)
}

const helperEnv = "FAULTLINE_TESTENV_HELPER"

// TestHelperHoldEnv is not a test on its own: TestKilledTestBinaryLeavesNoOrphans runs
// the test binary again with only this test selected and helperEnv set; it starts
// components, prints their pids and waits to be killed or to time out, or (helperEnv
// "panic") panics once a line arrives on stdin.
func TestHelperHoldEnv(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	env := Start(t, Options{Collector: true, Prometheus: &PrometheusOptions{}})
	var fields []string
	for name, pid := range env.processIDs() {
		fields = append(fields, name+"="+strconv.Itoa(pid))
	}
	fmt.Printf("\nPIDS %s\n", strings.Join(fields, " "))
	if mode == "panic" {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		panic("helper panics on purpose")
	}
	time.Sleep(10 * time.Minute)
}

// TestKilledTestBinaryLeavesNoOrphans ends a test binary that holds running
// components in the ways that skip or cut short its cleanups — SIGKILL, its own
// -test.timeout, a panic in the test — and checks that the components die with it.
func TestKilledTestBinaryLeavesNoOrphans(t *testing.T) {
	Integration(t)
	for _, mode := range []string{"sigkill", "timeout", "panic"} {
		t.Run(mode, func(t *testing.T) {
			timeout := "5m"
			if mode == "timeout" {
				timeout = "10s"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldEnv$", "-test.v", "-test.timeout="+timeout)
			helperMode := "hold"
			if mode == "panic" {
				helperMode = "panic"
			}
			// The helper dies before its own cleanups run, so its temporary
			// directories go under this test's, which are removed.
			cmd.Env = append(os.Environ(), helperEnv+"="+helperMode, ToolsPathEnv+"="+strings.Join(mustToolsPath(t), ":"), "TMPDIR="+t.TempDir())
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			var out lockedBuffer
			pidsLine := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					line := sc.Text()
					out.WriteString(line + "\n")
					if strings.HasPrefix(line, "PIDS ") {
						pidsLine <- strings.TrimPrefix(line, "PIDS ")
					}
				}
				waited <- cmd.Wait()
			}()
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			var line string
			select {
			case line = <-pidsLine:
			case err := <-waited:
				t.Fatalf("helper exited before starting its components: %v\n%s%s", err, out.String(), stderr.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("helper did not report its processes\n%s%s", out.String(), stderr.String())
			}
			pids := map[string]int{}
			for _, f := range strings.Fields(line) {
				name, v, _ := strings.Cut(f, "=")
				pid, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("bad PIDS line %q", line)
				}
				pids[name] = pid
			}
			snap := takeSnapshot(t, pids)
			if len(snap) < 6 { // loki, otelcol, prometheus and their watchdogs
				t.Fatalf("expected 6 processes, got %v", pids)
			}
			t0 := time.Now()
			switch mode {
			case "sigkill":
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			case "panic":
				if _, err := io.WriteString(stdin, "panic now\n"); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-waited:
				t.Logf("helper ended after %s: %v", time.Since(t0).Round(time.Millisecond), err)
			case <-time.After(time.Minute):
				t.Fatal("helper did not end")
			}
			t0 = time.Now()
			want := map[string]string{"timeout": "test timed out", "panic": "helper panics on purpose"}[mode]
			if !strings.Contains(out.String()+stderr.String(), want) {
				t.Errorf("helper did not end by %s:\n%s%s", mode, out.String(), stderr.String())
			}
			waitAllGone(t, snap, 10*time.Second)
			t.Logf("all %d processes gone %s after the helper died", len(snap), time.Since(t0).Round(time.Millisecond))
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mustToolsPath(t *testing.T) []string {
	dirs, err := toolsPath()
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

package checks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// Every node check that package probe registers has its implementation here.
func TestEveryCheckImplemented(t *testing.T) {
	n := 0
	for _, s := range probe.Default().List() {
		if s.RunsOn != probe.OnNode {
			continue
		}
		n++
		if s.New == nil {
			t.Errorf("%s: registered, not implemented", s.Name)
			continue
		}
		if pr := s.New(probe.Config{}); pr == nil {
			t.Errorf("%s: constructor builds nothing", s.Name)
		}
	}
	if n < 8 {
		t.Errorf("%d node checks registered, want at least 8", n)
	}
}

func TestRunCommand(t *testing.T) {
	ctx := context.Background()
	_, err := runCommand(ctx, "/nonexistent/pciebw", nil)
	if err == nil || !strings.Contains(err.Error(), "program not found") {
		t.Errorf("missing program: %v", err)
	}
	_, err = runCommand(ctx, "faultline-no-such-program", nil)
	if err == nil || !strings.Contains(err.Error(), "program not found") {
		t.Errorf("missing program on PATH: %v", err)
	}
	// A program that exits non-zero is not an error: its exit code is the verdict.
	path, _ := fake(t, "dcgmi", "dcgmi/no-hostengine.json")
	out, err := runCommand(ctx, path, []string{"diag", "-r", "1", "-j"})
	if err != nil || out.ExitCode != 250 || !strings.Contains(out.stderrTail(), "Unable to connect to host engine") {
		t.Errorf("exit 250: %v %d %q", err, out.ExitCode, out.stderrTail())
	}
	// A cancelled program is killed, with its process group.
	t.Setenv("FAULTLINE_FAKE_SLEEP", "30s")
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = runCommand(cctx, path, []string{"diag", "-r", "1", "-j"})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled: %v after %v", err, time.Since(start))
	}
}

func TestPCIeMath(t *testing.T) {
	cases := []struct {
		gen, width int
		want       float64
	}{
		{1, 16, 4}, {2, 16, 8}, {3, 16, 15.75}, {4, 16, 31.51}, {4, 8, 15.75}, {5, 16, 63.02}, {6, 16, 121}, {4, 0, 0}, {9, 16, 0},
	}
	for _, c := range cases {
		got := PCIeTheoreticalGBps(c.gen, c.width)
		if got < c.want-0.01 || got > c.want+0.01 {
			t.Errorf("gen%d x%d = %.3f GB/s, want %.2f", c.gen, c.width, got, c.want)
		}
	}
	for in, want := range map[string]string{
		"00000000:3B:00.0": "0000:3b:00.0", "0000:3b:00.0": "0000:3b:00.0", "3b:00.0": "0000:3b:00.0",
		"00000001:C1:1F.7\x00\x00": "0001:c1:1f.7", "GPU-1234": "", "": "", "0000:3b:20.0": "",
	} {
		if got := probe.NormalizePCI(in); got != want {
			t.Errorf("NormalizePCI(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]int{"2.5 GT/s PCIe": 1, "5.0 GT/s PCIe": 2, "8.0 GT/s PCIe": 3, "16.0 GT/s PCIe": 4, "32.0 GT/s PCIe": 5, "64.0 GT/s PCIe": 6, "Unknown": 0} {
		if got := speedToGen(in); got != want {
			t.Errorf("speedToGen(%q) = %d, want %d", in, got, want)
		}
	}
}

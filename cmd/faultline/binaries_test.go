package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/test/testenv"
)

// Each production binary, built as `make build` builds it (faultline static, the
// probe agent with cgo) and with no build tag, starts: --version and --help answer.
// A cgo binary linking both Go's plugin package and go-nvml would die at start with a
// symbol lookup error, before main.
func TestBinariesStart(t *testing.T) {
	testenv.Integration(t)
	for _, b := range []struct {
		bin, help string
	}{
		{testenv.BuildFaultline(t), "faultline scan"},
		{testenv.BuildProbeAgent(t), "--nvml-events"},
	} {
		out, err := exec.Command(b.bin, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), " version ") {
			t.Errorf("%s --version: %v\n%s", b.bin, err, out)
		}
		out, err = exec.Command(b.bin, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), b.help) {
			t.Errorf("%s --help: %v\n%s", b.bin, err, out)
		}
	}
}

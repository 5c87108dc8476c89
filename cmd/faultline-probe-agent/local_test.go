package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/internal/cli"
)

// recorded is the folder of the probe programs' outputs recorded on real machines.
var recorded = filepath.Join("..", "..", "active-probes", "checks", "testdata", "recorded")

// program writes an executable that prints a recorded output (and its stderr and
// exit status, where recorded) whatever its arguments.
func program(t *testing.T, name, rec string) string {
	t.Helper()
	src := filepath.Join(recorded, rec)
	script := "#!/bin/sh\ncat '" + src + "'\n"
	if _, err := os.Stat(src + ".stderr"); err == nil {
		script += "cat '" + src + ".stderr' >&2\n"
	}
	if b, err := os.ReadFile(src + ".exit"); err == nil {
		script += "exit " + strings.TrimSpace(string(b)) + "\n"
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"check"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// The check command runs the agent's checks here, once: pciebw and dgemm over the
// outputs the CUDA programs printed on an H200, as a person reads them and as JSON.
func TestCheckCommandRecordedH200(t *testing.T) {
	pciebw := program(t, "pciebw", "pciebw/h200-pass.jsonl")
	dgemm := program(t, "dgemm", "dgemm/h200-pass.jsonl")
	out, err := runCheck(t, "pciebw", "dgemm", "--force", "--command", "pciebw="+pciebw, "--command", "dgemm="+dgemm)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"pciebw: pass in ", "dgemm: pass in ", "  0 0000:00:06.0 NVIDIA H200: pass\n",
		"    d2h_gbps=55.36 h2d_gbps=55.49 ", "lowest DGEMM 64.84 TFLOPS, lowest DAXPY 4022 GB/s",
		"daxpy_gbps=4022.3 dgemm_tflops=64.84 min_daxpy_gbps=3200 min_dgemm_tflops=46.9",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = runCheck(t, "dgemm", "--force", "--command", "dgemm="+dgemm, "--param", "dgemm.n=4096", "--format", "json", "--node", "gpu-3")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res probe.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Node != "gpu-3" || res.Check != "dgemm" || res.Status != probe.StatusPass || res.Params["n"] != "4096" ||
		len(res.Devices) != 1 || res.Devices[0].Values["dgemm_tflops"] != 64.84 {
		t.Errorf("result %+v", res)
	}
}

// A check that fails or cannot run makes the command exit 2 after printing its
// result; a wrong command line is refused before anything runs.
func TestCheckCommandRefusals(t *testing.T) {
	bad := program(t, "pciebw", "pciebw/h200-no-such-gpu.jsonl")
	out, err := runCheck(t, "pciebw", "--force", "--command", "pciebw="+bad, "--param", "pciebw.gpus=1")
	var ee cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(out, "pciebw: error in ") || !strings.Contains(out, "GPU 1 does not exist (1 GPUs)") {
		t.Errorf("missing GPU: %v\n%s", err, out)
	}
	// Without a name, the routine checks: nvml alone (skipped where there is no
	// NVML library, as in CI), none of the invasive ones.
	out, err = runCheck(t)
	if !strings.HasPrefix(out, "nvml: ") || strings.Contains(out, "pciebw") || strings.Contains(out, "dgemm") {
		t.Errorf("no check named: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pciebw", "--command", "pciebw=" + bad}, "check pciebw is invasive"},
		{[]string{"nosuch"}, `unknown check "nosuch"`},
		{[]string{"pvc"}, `unknown check "pvc"`}, // the controller's
		{[]string{"nvml", "--param", "dgemm.n=4096"}, "check dgemm is not run"},
		{[]string{"nvml", "--param", "nvml.nosuch=1"}, "nosuch"},
		{[]string{"nvml", "--format", "yaml"}, "--format must be text or json"},
	} {
		out, err := runCheck(t, tc.args...)
		if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), tc.want) || strings.Contains(out, ": pass in ") {
			t.Errorf("%v: err %v, want %q; output %q", tc.args, err, tc.want, out)
		}
	}
}

package checks

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// fakeBin is the directory holding the fake pciebw, dgemm, dcgmi, ping and nvidia-smi (testdata/fake),
// built once by TestMain.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "faultline-probe-fakes-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := buildFakes(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building the fake programs:", err)
	} else {
		fakeBin = dir
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildFakes(dir string) error {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			return err
		}
	}
	start := time.Now()
	exe := filepath.Join(dir, "fake")
	cmd := exec.Command(goBin, "build", "-o", exe, "./testdata/fake")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	for _, name := range []string{"pciebw", "dgemm", "dcgmi", "ping", "nvidia-smi"} {
		if err := os.Symlink(exe, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "fake programs built in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// fake returns the path of a fake program and makes it print the recorded output at
// testdata/recorded/<rec>; the arguments it receives are appended to the returned file.
func fake(t *testing.T, prog, rec string) (path, argsFile string) {
	t.Helper()
	out, err := filepath.Abs(filepath.Join("testdata", "recorded", rec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("recorded output: %v", err)
	}
	argsFile = filepath.Join(t.TempDir(), "args")
	t.Setenv("FAULTLINE_FAKE_OUTPUT", out)
	t.Setenv("FAULTLINE_FAKE_ARGS", argsFile)
	return filepath.Join(fakeBin, prog), argsFile
}

// fakeArgs returns the argument vectors the fake received, one per run.
func fakeArgs(t *testing.T, argsFile string) []string {
	t.Helper()
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatalf("the fake was not run: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// runOne registers spec (with a constructor returning pr) in a fresh registry and runs
// it through a Runner with metrics, as the agent will.
func runOne(t *testing.T, spec probe.Spec, pr probe.Probe, p probe.Params) (probe.Result, *prometheus.Registry) {
	t.Helper()
	reg := probe.NewRegistry()
	spec.New = func(probe.Config) probe.Probe { return pr }
	reg.MustRegister(spec)
	prom := prometheus.NewRegistry()
	r := probe.NewRunner(reg, probe.Config{Node: "gpu-node-07"}, probe.NewMetrics(prom))
	res, err := r.Run(context.Background(), spec.Name, p)
	if err != nil {
		t.Fatalf("run %s: %v", spec.Name, err)
	}
	t.Logf("%s: %s in %s: %s", spec.Name, res.Status, res.Duration.Round(time.Millisecond), res.Message)
	return res, prom
}

// mustSpec returns the registered spec of a probe.
func mustSpec(t *testing.T, name string) probe.Spec {
	t.Helper()
	s, ok := probe.Default().Get(name)
	if !ok {
		t.Fatalf("probe %s not registered", name)
	}
	return s
}

func wantStatus(t *testing.T, what string, got, want probe.Status) {
	t.Helper()
	if got != want {
		t.Errorf("%s: status %s, want %s", what, got, want)
	}
}

func deviceStatus(t *testing.T, res probe.Result, id string, want probe.Status) *probe.DeviceResult {
	t.Helper()
	d := res.Device(id)
	if d == nil {
		t.Fatalf("no device %s in %+v", id, res.Devices)
	}
	if d.Status != want {
		t.Errorf("device %s: status %s (%s), want %s", id, d.Status, d.Message, want)
	}
	return d
}

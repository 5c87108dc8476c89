package checks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The CUDA programs as nvcc built them (`make cuda`, which `make test` runs first), on
// a machine without a GPU: the probes must turn the real programs' failure into an
// error result that says why, not a pass and not a crash.
func TestRealCUDAProgramsWithoutGPU(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "bin", "cuda")
	if _, err := os.Stat(filepath.Join(dir, "pciebw")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bin/cuda/pciebw missing: `make test` builds it with `make cuda` first (%v)", err)
		}
		t.Skipf("bin/cuda not built: run `make cuda` (%v)", err)
	}
	for _, name := range []string{"pciebw", "dgemm"} {
		spec := mustSpec(t, name)
		p := spec.New(probe.Config{Node: "no-gpu", Commands: map[string]string{name: filepath.Join(dir, name)}})
		res, _ := runOne(t, spec, p, probe.Params{})
		t.Logf("%s on a machine without a GPU: %s: %s", name, res.Status, res.Message)
		if res.Status != probe.StatusError && res.Status != probe.StatusSkipped {
			t.Errorf("%s without a GPU: status %s, want error or skipped", name, res.Status)
		}
		if !strings.Contains(res.Message, "CUDA") && !strings.Contains(res.Message, "cuda") && !strings.Contains(res.Message, "lib") {
			t.Errorf("%s: message %q does not say what is missing", name, res.Message)
		}
	}
}

package v1alpha1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestGeneratedFresh fails when the deepcopy code or the CRD is not what the pinned
// controller-gen makes of types.go now: run make generate (then make manifests).
func TestGeneratedFresh(t *testing.T) {
	testenv.Integration(t)
	cg := testenv.Binary(t, "controller-gen")
	out := t.TempDir()
	cmd := exec.Command(cg, "object", "paths=.", "output:object:dir="+out, "crd:crdVersions=v1", "output:crd:dir="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}
	for gen, committed := range map[string]string{
		"zz_generated.deepcopy.go":     "zz_generated.deepcopy.go",
		"faultline.io_nodefaults.yaml": "nodefaults.crd.yaml",
		"faultline.io_proberuns.yaml":  "proberuns.crd.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(out, gen))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(committed)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%v): run make generate", committed, err)
		}
	}
	if !bytes.Equal(v1alpha1.NodeFaultCRDYAML, mustRead(t, "nodefaults.crd.yaml")) {
		t.Error("the embedded CRD is not nodefaults.crd.yaml")
	}
	if !bytes.Equal(v1alpha1.ProbeRunCRDYAML, mustRead(t, "proberuns.crd.yaml")) {
		t.Error("the embedded CRD is not proberuns.crd.yaml")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

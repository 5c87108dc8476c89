package main

import (
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/test/testenv"
)

// The drain helper (k8s.io/kubectl/pkg/drain) reaches kustomize's plugin loader,
// which imports Go's plugin package unless the build has the tag
// kustomize_disable_go_plugin_support; with plugin linked, a cgo binary binds every
// dynamic symbol at start and, linking go-nvml, dies before main. The build's flags
// (GOFLAGS, as the Makefile exports them) must keep plugin out of the cgo binary.
func TestCgoBinaryLinksNoGoPlugin(t *testing.T) {
	deps := linkedPackages(t, module+"/cmd/faultline", "1")
	for _, want := range []string{"k8s.io/kubectl/pkg/drain", "github.com/NVIDIA/go-nvml/pkg/nvml"} {
		if _, ok := deps[want]; !ok {
			t.Fatalf("CGO_ENABLED=1: cmd/faultline does not link %s: the check below proves nothing", want)
		}
	}
	if by, ok := deps["plugin"]; ok {
		sort.Strings(by)
		t.Errorf("CGO_ENABLED=1: cmd/faultline links Go's plugin package (imported by %s): build with -tags=%s (the Makefile exports it in GOFLAGS)",
			strings.Join(by, ", "), testenv.BuildTags)
	}
}

// The cgo binary, built as the tests and `make build-cgo` build it, starts: the
// failure the tag prevents is a symbol lookup error before main.
func TestCgoBinaryStarts(t *testing.T) {
	testenv.Integration(t)
	bin := testenv.BuildFaultlineCgo(t)
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "faultline scan") {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/faultline-dev/faultline"

// The production binary links neither the testing package nor anything under test/ (the
// harness that launches etcd, kube-apiserver and Loki, the demo) nor a test library: the
// image carries none of it, and a test-helper edit cannot break production. With and
// without cgo, as the two images build it.
func TestProductionBinaryLinksNoTestCode(t *testing.T) {
	for _, cgo := range []string{"0", "1"} {
		deps := linkedPackages(t, module+"/cmd/faultline", cgo)
		if _, ok := deps[module+"/rules"]; !ok || len(deps) < 100 {
			t.Fatalf("CGO_ENABLED=%s: go list -deps ./cmd/faultline lists %d packages, without %s/rules: not the binary's dependencies", cgo, len(deps), module)
		}
		for _, bad := range testCode(deps) {
			t.Errorf("CGO_ENABLED=%s: cmd/faultline links %s", cgo, bad)
		}
	}
}

// The check above finds test code where it is linked: the demo's program links both the
// harness and testing.
func TestTestCodeFoundInDemo(t *testing.T) {
	found := strings.Join(testCode(linkedPackages(t, module+"/cmd/faultline-demo", "1")), "\n")
	for _, want := range []string{"testing (imported by", module + "/test/testenv (imported by", module + "/test/demo (imported by"} {
		if !strings.Contains(found, want) {
			t.Errorf("test code found in cmd/faultline-demo lacks %q:\n%s", want, found)
		}
	}
}

// linkedPackages returns every package pkg is built from, each with the packages of the
// same build that import it.
func linkedPackages(t *testing.T, pkg, cgo string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("CGO_ENABLED=%s go list -deps %s: %v\n%s", cgo, pkg, err, stderr(err))
	}
	deps := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if _, ok := deps[f[0]]; !ok {
			deps[f[0]] = nil
		}
		for _, imp := range f[1:] {
			deps[imp] = append(deps[imp], f[0])
		}
	}
	return deps
}

// testCode lists the test-only packages among deps, each with its importers.
func testCode(deps map[string][]string) []string {
	var out []string
	for p, by := range deps {
		if isTestCode(p) {
			sort.Strings(by)
			out = append(out, fmt.Sprintf("%s (imported by %s)", p, strings.Join(by, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

func isTestCode(p string) bool {
	if p == "testing" || strings.HasPrefix(p, "testing/") || p == module+"/test" || strings.HasPrefix(p, module+"/test/") {
		return true
	}
	for _, lib := range []string{"github.com/stretchr/", "github.com/onsi/", "gotest.tools/", "github.com/golang/mock/", "go.uber.org/mock/"} {
		if strings.HasPrefix(p, lib) {
			return true
		}
	}
	return false
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

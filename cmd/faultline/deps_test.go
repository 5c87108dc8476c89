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

// The production binaries.
var (
	faultlineCmd  = module + "/cmd/faultline"
	probeAgentCmd = module + "/cmd/faultline-probe-agent"
)

// The production binaries link neither the testing package nor anything under test/
// (the harness that launches etcd, kube-apiserver and Loki, the demo) nor a test
// library: the images carry none of it, and a test-helper edit cannot break
// production. With and without cgo.
func TestProductionBinaryLinksNoTestCode(t *testing.T) {
	for _, pkg := range []string{faultlineCmd, probeAgentCmd} {
		for _, cgo := range []string{"0", "1"} {
			deps := linkedPackages(t, pkg, cgo)
			if _, ok := deps[module+"/certreload"]; !ok || len(deps) < 100 {
				t.Fatalf("CGO_ENABLED=%s: go list -deps %s lists %d packages, without %s/certreload: not the binary's dependencies", cgo, pkg, len(deps), module)
			}
			for _, bad := range testCode(deps) {
				t.Errorf("CGO_ENABLED=%s: %s links %s", cgo, pkg, bad)
			}
		}
	}
}

// One binary per role, each linking only its own. faultline (controller, exporter,
// CLI) links the drain helper, which reaches Go's plugin package through kustomize;
// the probe agent links go-nvml, whose symbols are resolved when libnvidia-ml is
// loaded. A cgo binary that linked both would bind every dynamic symbol at start and
// die before main: so faultline links no NVML and no part of the agent (the checks'
// metadata, package probe, is enough to route them), and the agent nothing of the
// controller.
func TestEachRoleLinksOnlyItsOwn(t *testing.T) {
	roles := []struct {
		pkg       string
		must, not []string
	}{
		{faultlineCmd, []string{"k8s.io/kubectl/pkg/drain", module + "/active-probes/probe", module + "/active-probes/agentapi"},
			[]string{"github.com/NVIDIA/go-nvml/", module + "/active-probes/agent", module + "/active-probes/checks", module + "/active-probes/nvmlevents"}},
		{probeAgentCmd, []string{"github.com/NVIDIA/go-nvml/pkg/nvml", module + "/active-probes/agent", module + "/active-probes/checks", module + "/active-probes/nvmlevents"},
			[]string{"k8s.io/kubectl/pkg/drain", "sigs.k8s.io/kustomize/", "plugin", module + "/controller", module + "/rules"}},
	}
	for _, r := range roles {
		deps := linkedPackages(t, r.pkg, "1")
		for _, p := range r.must {
			if _, ok := deps[p]; !ok {
				t.Errorf("%s does not link %s: the checks below prove nothing", r.pkg, p)
			}
		}
		for _, bad := range r.not {
			for p, by := range deps {
				if p == bad || strings.HasPrefix(p, strings.TrimSuffix(bad, "/")+"/") {
					sort.Strings(by)
					t.Errorf("%s links %s (imported by %s)", r.pkg, p, strings.Join(by, ", "))
				}
			}
		}
	}
}

// No program of this module, nor any of its test binaries, links both Go's plugin
// package and go-nvml: such a cgo binary dies at start (see above), and no build tag
// is there to prevent it.
func TestNoBinaryLinksPluginAndNVML(t *testing.T) {
	cmd := exec.Command("go", "list", "-test", "-f", `{{if eq .Name "main"}}{{.ImportPath}} {{join .Deps " "}}{{end}}`, module+"/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	var mains []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		mains = append(mains, f[0])
		deps := map[string]bool{}
		for _, d := range f[1:] {
			deps[d] = true
		}
		if deps["plugin"] && deps["github.com/NVIDIA/go-nvml/pkg/nvml"] {
			t.Errorf("CGO_ENABLED=1: %s links both plugin and go-nvml", f[0])
		}
	}
	if !contains(mains, faultlineCmd) || !contains(mains, probeAgentCmd) || !contains(mains, module+"/controller.test") {
		t.Fatalf("go list found these programs and test binaries, not the module's: %v", mains)
	}
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
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

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// BuildFaultline builds the faultline binary from this checkout into a temp dir, for
// tests that run a component as its own process (to kill it, or to measure it). It
// is built as `make build` builds it: without cgo, a static binary (the probe agent's
// image adds cgo for NVML, as BuildDemo does).
func BuildFaultline(t TB) string {
	t.Helper()
	return buildCommand(t, t.TempDir(), "faultline", "0")
}

// BuildDemo builds faultline-demo and, next to it, the faultline binary whose processes
// it runs as the exporters and the controller, both with cgo as make demo builds them.
// It returns the demo's path.
func BuildDemo(t TB) string {
	t.Helper()
	dir := t.TempDir()
	buildCommand(t, dir, "faultline", "1")
	return buildCommand(t, dir, "faultline-demo", "1")
}

// BuildFaultlineCgo builds the faultline binary with cgo, as `make build-cgo` builds
// the probe agent's (it links go-nvml's bindings).
func BuildFaultlineCgo(t TB) string {
	t.Helper()
	return buildCommand(t, t.TempDir(), "faultline", "1")
}

// BuildTags are the build tags every build of this module needs, as the Makefile's
// GO_TAGS: without kustomize_disable_go_plugin_support a cgo build is refused
// (controller/act/buildtag_guard.go). Passed on the command line, so a test run
// given the tag by -tags rather than GOFLAGS builds its binaries with it too.
const BuildTags = "kustomize_disable_go_plugin_support"

// buildCommand builds ./cmd/<name> of this checkout into dir.
func buildCommand(t TB, dir, name, cgo string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-tags="+BuildTags, "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// RSS returns a process's resident set size in bytes (0 if it cannot be read).
func RSS(pid int) int64 { return procStatus(pid, "VmRSS:") }

// RSSAnon returns the anonymous part of a process's resident set (heap, stacks) in
// bytes, without the pages of its executable and other mapped files.
func RSSAnon(pid int) int64 { return procStatus(pid, "RssAnon:") }

func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BuildFakeGPUPrograms builds the recorded-output stand-in for the programs that need a
// GPU or DCGM (active-probes/checks/testdata/fake) and links it as pciebw, dgemm,
// dcgmi and nvidia-smi in a new directory, which it returns. Each prints the file
// named by FAULTLINE_FAKE_OUTPUT_<PROGRAM> (NVIDIA_SMI for nvidia-smi) or
// FAULTLINE_FAKE_OUTPUT.
func BuildFakeGPUPrograms(t TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "fake"), "./active-probes/checks/testdata/fake")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: build the fake GPU programs: %v\n%s", err, out)
	}
	for _, name := range []string{"pciebw", "dgemm", "dcgmi", "nvidia-smi"} {
		if err := os.Symlink(filepath.Join(dir, "fake"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

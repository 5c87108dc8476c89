package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BuildFaultline builds the faultline binary (controller, exporter, CLI) from this
// checkout into a temp dir, for tests that run a component as its own process (to kill
// it, or to measure it). It is built as `make build` builds it (releaseFlags, without
// cgo, a static binary), so that what a test measures is what the image runs.
func BuildFaultline(t TB) string {
	t.Helper()
	return buildCommand(t, t.TempDir(), "faultline", "0")
}

// BuildProbeAgent builds the probe agent's binary, faultline-probe-agent, with cgo as
// `make build` builds it (releaseFlags; it links go-nvml's bindings), into a temp dir.
func BuildProbeAgent(t TB) string {
	t.Helper()
	return buildCommand(t, t.TempDir(), "faultline-probe-agent", "1")
}

// BuildDemo builds faultline-demo (with cgo: its agents read go-nvml's mock) and, next
// to it, the faultline binary whose processes it runs as the exporters and the
// controller, as make demo builds them. It returns the demo's path.
func BuildDemo(t TB) string {
	t.Helper()
	dir := t.TempDir()
	buildCommand(t, dir, "faultline", "0")
	return buildCommand(t, dir, "faultline-demo", "1")
}

// releaseFlags are the Makefile's RELEASE_FLAGS: stripped, without local paths. An
// unstripped binary maps its symbol table too, about 25 MiB more resident memory
// than the image's binary, which a measurement would charge to the controller.
var releaseFlags = []string{"-trimpath", "-ldflags=-s -w"}

// buildCommand builds ./cmd/<name> of this checkout into dir.
func buildCommand(t TB, dir, name, cgo string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	args := append(append([]string{"build"}, releaseFlags...), "-o", bin, "./cmd/"+name)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// RSS returns a process's resident set size in bytes (0 if it cannot be read).
func RSS(pid int) int64 { rss, _, _ := RSSParts(pid); return rss }

// RSSAnon returns the anonymous part of a process's resident set (heap, stacks) in
// bytes, without the pages of its executable and other mapped files.
func RSSAnon(pid int) int64 { _, anon, _ := RSSParts(pid); return anon }

// RSSParts returns VmRSS and its anonymous and file-backed parts (RssAnon, RssFile),
// read at once, in bytes (0 for what cannot be read).
func RSSParts(pid int) (rss, anon, file int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0
	}
	return statusField(b, "VmRSS:"), statusField(b, "RssAnon:"), statusField(b, "RssFile:")
}

// CPUTime returns the CPU time (user and system) a process has used so far (0 if it
// cannot be read).
func CPUTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th, in clock ticks (USER_HZ, 100 on
	// Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// statusField is the value of a kB field of /proc/<pid>/status, in bytes.
func statusField(b []byte, field string) int64 {
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

// BuildFakeNVML compiles the stand-in for libnvidia-ml.so.1
// (active-probes/checks/testdata/fakenvml) with the C compiler cgo uses and returns
// its path, for a probe agent's --nvml-library: its nvml check then sees
// $FAULTLINE_FAKE_NVML_GPUS GPUs (8 when unset), none of which it can open.
func BuildFakeNVML(t TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatalf("testenv: go env CC: %v", err)
	}
	lib := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	cmd := exec.Command(strings.TrimSpace(string(cc)), "-shared", "-fPIC", "-o", lib,
		filepath.Join(root, "active-probes", "checks", "testdata", "fakenvml", "fakenvml.c"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: build the fake NVML library: %v\n%s", err, out)
	}
	return lib
}

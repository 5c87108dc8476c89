package demo_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/test/testenv"
)

// `faultline-demo --once` plays the scenario with the real components and exits 0
// only if every outcome held.
func TestDemoOnce(t *testing.T) {
	testenv.Integration(t)
	bin := testenv.BuildDemo(t)
	var out bytes.Buffer
	dir := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command(bin, "--once", "--dir", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	t.Logf("faultline-demo --once: %s\n%s", time.Since(t0).Round(time.Millisecond), out.String())
	if err != nil {
		logComponents(t, filepath.Join(dir, "logs"))
		t.Fatalf("faultline-demo --once: %v", err)
	}
	for _, want := range []string{"PASS  Xid 13 on gpu-1 → an Event", "PASS  Xid 79 on gpu-3 → tainted", "PASS  link flaps on gpu-2",
		"PASS  LogQL finds the Xid line", "PASS  nvml passes on every node",
		"PASS  Xid 79 again on gpu-3 → ladder step 1 (drain)", "PASS  Xid 79 again on gpu-3 → ladder step 2 (service)",
		"PASS  gpu-3 handed to the hardware team", "PASS  link flaps on three nodes of rack-a → one fleet fault",
		"PASS  the fault's record lists the pod of Job llm-pretrain that held gpu-3's GPUs",
		"PASS  pod llm-pretrain-worker-0 on gpu-3 has a Warning Event naming the fault",
		"PASS  gpu-4 busy: AER → the unconfirmed taint, phase AwaitingIdle",
		"PASS  gpu-4 idle: pciebw ran → the taint confirmed (aer-nonfatal)",
		"PASS  gpu-5: scheduled nvml finds 7 of 8 GPUs → tainted",
		"PASS  gpu-6: an SXid group → one fault whose evidence holds its three lines", "PASS  gpu-6 has one NodeFault",
		"PASS  a line without an exporter's token is refused by the collector (401)",
		"PASS  a line sent with gpu-1's token is gpu-1's, whatever node it claims",
		"PASS  the refused line tainted nothing", "PASS  a viewer's request on a fault is refused by the API server",
		"PASS  each agent got a certificate for its own node", "all 22 outcomes held"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// kubectl describe of gpu-3's fault, printed when it is recorded: the evidence
	// line, the query of the rule's lines on the node, the taint placed.
	describe := out.String()
	if i := strings.Index(describe, "$ kubectl describe nodefault gpu-3.nvidia-xid.xid-gpu-lost"); i < 0 {
		t.Errorf("output lacks kubectl describe nodefault gpu-3.nvidia-xid.xid-gpu-lost")
	} else {
		describe = describe[i:]
		describe = describe[:max(0, strings.Index(describe, "Scenario 3/9"))]
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`Text:\s+NVRM: Xid \(PCI:0000:4e:00\): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus\.`),
			regexp.MustCompile(`Query:\s+\{source="kernel"\} \| node="gpu-3" \|~ `),
			regexp.MustCompile(`Taint:\s+faultline\.io/faulty=xid-gpu-lost:NoSchedule`),
			regexp.MustCompile(`State:\s+Placed`),
			regexp.MustCompile(`Warning\s+FaultTainted\s`),
		} {
			if !want.MatchString(describe) {
				t.Errorf("kubectl describe nodefault gpu-3.nvidia-xid.xid-gpu-lost lacks %s:\n%s", want, describe)
			}
		}
	}
	// kubectl get nodefaults, printed at the end: gpu-3's fault at its ladder's
	// service step, and the rack's fleet fault (named by its group, with its
	// members' rule, severity and mode).
	table := out.String()[strings.LastIndex(out.String(), "kubectl get nodefaults"):]
	if !regexp.MustCompile(`(?m)^\s+\S+\s+gpu-3\s+xid-gpu-lost\s+critical\s+enforce\s+service\s`).MatchString(table) {
		t.Errorf("kubectl get nodefaults lacks gpu-3's fault at step service:\n%s", table)
	}
	if !regexp.MustCompile(`(?m)^\s+\S+\s+topology\.kubernetes\.io/rack=rack-a\s+link-flap\s+critical\s+enforce\s+Held\s`).MatchString(table) {
		t.Errorf("kubectl get nodefaults lacks rack-a's fleet fault:\n%s", table)
	}
}

// logComponents logs what a failed run's components said that explains an outcome:
// the controller's and the exporters' warnings and errors and the controller's
// terms (leading, resuming, warm-up), then the end of the controller's log.
func logComponents(t *testing.T, logs string) {
	t.Helper()
	telling := regexp.MustCompile(`level=(WARN|ERROR)|leading|resuming|warm|restarting|lost`)
	files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
	for _, f := range files {
		name := filepath.Base(f)
		if name != "controller.log" && !strings.HasPrefix(name, "dmesg-exporter-") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		var said []string
		for _, l := range lines {
			if telling.MatchString(l) {
				said = append(said, l)
			}
		}
		if len(said) > 200 {
			said = said[len(said)-200:]
		}
		t.Logf("----- %s: %d of %d lines -----\n%s", name, len(said), len(lines), strings.Join(said, "\n"))
		if name == "controller.log" {
			t.Logf("----- the last 60 lines of controller.log -----\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	}
}

// Without --once the demo stays up, says how to try things by hand, and on Ctrl-C
// stops every process it started.
func TestDemoStaysUpAndCleansUp(t *testing.T) {
	testenv.Integration(t)
	bin := testenv.BuildDemo(t)
	dir := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command(bin, "--dir", dir)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var out strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "Logs of every component") {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(3 * time.Minute):
		t.Fatalf("demo did not come up:\n%s", out.String())
	}
	// The components are running now: their command lines name the demo's directory.
	if n := processesUsing(t, dir); n < 7 {
		t.Fatalf("%d processes use %s; want etcd, kube-apiserver, Loki, the collector, an exporter per node and the controller", n, dir)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		pw.Close()
		if err != nil {
			t.Errorf("demo after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not stop within 60s of Ctrl-C")
	}
	if n := processesUsing(t, dir); n != 0 {
		t.Errorf("%d processes still use %s after the demo stopped", n, dir)
	}
}

// processesUsing counts processes whose command line mentions dir.
func processesUsing(t *testing.T, dir string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) {
			n++
		}
	}
	return n
}

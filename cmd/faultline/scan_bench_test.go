package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/rules/scan"
)

// grepPatterns are 40 extended regular expressions an operator would grep a GPU
// node's kernel log for: the baseline `faultline scan` is measured against.
var grepPatterns = []string{
	`NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): [0-9]+`,
	`SXid \(PCI:[0-9a-fA-F:.]+\): [0-9]+, (Fatal|Non-fatal)`,
	`GPU has fallen off the bus`,
	`NVRM: (RmInitAdapter failed|GPU [0-9a-f:.]+: RmInitAdapter)`,
	`AER: (Corrected|Uncorrected|Uncorrectable|Multiple)`,
	`PCIe Bus Error: severity=`,
	`Link (down|DOWN)`,
	`lost carrier`,
	`Port: [0-9]+ Link DOWN`,
	`Call Trace:`,
	`Kernel panic - not syncing`,
	`BUG: (soft lockup|unable to handle|scheduling while atomic)`,
	`blocked for more than [0-9]+ seconds`,
	`Out of memory: Killed process [0-9]+`,
	`invoked oom-killer`,
	`I/O error, dev [a-z0-9]+, sector [0-9]+`,
	`Buffer I/O error on dev`,
	`EXT4-fs error`,
	`XFS \([a-z0-9]+\): (Corruption|Metadata)`,
	`nvme[0-9]+: I/O [0-9]+ QID [0-9]+ timeout`,
	`EDAC (MC|PCI)[0-9]*: [0-9]+ (CE|UE)`,
	`mce: \[Hardware Error\]`,
	`Machine check events logged`,
	`general protection fault`,
	`segfault at [0-9a-f]+`,
	`NCCL WARN`,
	`NCCL error`,
	`CUDA error: (an illegal memory access|out of memory|unspecified launch failure)`,
	`Watchdog caught collective operation timeout`,
	`uncorrectable ECC error`,
	`nvidia-peermem .*ERROR`,
	`mlx5_core [0-9a-f:.]+: .*(health|fatal|syndrome)`,
	`(hard|soft) LOCKUP`,
	`rcu_(sched|preempt) detected stalls`,
	`WARNING: CPU: [0-9]+ PID: [0-9]+`,
	`task [a-z0-9_/-]+:[0-9]+ blocked`,
	`nv-fabricmanager|fabric manager`,
	`temperature above threshold`,
	`Remote I/O error|Input/output error`,
	`hung_task_timeout_secs`,
}

// faultKernel are the lines the packs exist for, sprinkled rarely into the log.
var faultKernel = []string{
	"NVRM: Xid (PCI:0000:%x:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
	"NVRM: Xid (PCI:0000:%x:00): 13, pid=%d, name=python3, Graphics Exception: ESR 0x504648=0x11f000e",
	"pcieport 0000:%x:01.0: AER: Corrected error received: 0000:%x:00.0",
	"mlx5_core 0000:%x:00.0 ib0: Link down",
	"nvme nvme%d: I/O %d QID %d timeout, aborting",
	"INFO: task python3:%d blocked for more than 122 seconds.",
}

// healthyKernelTemplates are the message templates of a healthy GPU node's kernel
// log (testdata/healthy-kernel-templates.txt); %d and %x take random values so no two
// lines are alike.
func healthyKernelTemplates() ([]string, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "healthy-kernel-templates.txt"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, nil
}

// writeKernLog writes about size bytes of a merged syslog kern.log of four GPU nodes:
// mostly benign lines, one fault line in about 2000. Deterministic for a seed.
//
// The benign templates are drawn uniformly, so lines a healthy node prints only at
// boot or on a link event ("NIC Link is Up", "nvidia-nvswitchN: open", "NVRM: GPU at
// PCI:...") are a thirtieth of the log each, and about one line in ten holds some
// rule's literal; in a real kern.log pod churn (veth, cni, audit) outnumbers them by
// far. That makes the log harder on scan than a real one, not easier; it is kept so,
// and the ratio stays comparable between changes.
func writeKernLog(w io.Writer, size int64, seed int64) error {
	benignKernel, err := healthyKernelTemplates()
	if err != nil {
		return err
	}
	r := rand.New(rand.NewSource(seed))
	bw := bufio.NewWriterSize(w, 1<<20)
	hosts := []string{"gpu-001", "gpu-002", "gpu-003", "gpu-004"}
	t := time.Date(2026, time.November, 23, 0, 0, 0, 0, time.UTC)
	var n int64
	args := make([]any, 12)
	for n < size {
		t = t.Add(time.Duration(r.Intn(400)) * time.Millisecond)
		tmpl := benignKernel[r.Intn(len(benignKernel))]
		if r.Intn(2000) == 0 {
			tmpl = faultKernel[r.Intn(len(faultKernel))]
		}
		for i := range args {
			args[i] = r.Intn(60000)
		}
		msg := fmt.Sprintf(tmpl, args[:strings.Count(tmpl, "%")]...)
		k, err := fmt.Fprintf(bw, "%s %s kernel: [%d.%06d] %s\n", t.Format(time.Stamp), hosts[r.Intn(len(hosts))],
			t.Unix()-1795391000, t.Nanosecond()/1000, msg)
		if err != nil {
			return err
		}
		n += int64(k)
	}
	return bw.Flush()
}

// TestScanVsGrep runs GNU grep -E with 40 representative patterns and `faultline
// scan` with the default packs over the same generated kernel log, in the same run,
// and reports the throughput ratio (reported, never gated on time). The size is
// FAULTLINE_SCAN_BENCH_MB (default 4; `make bench-scan` uses 100).
func TestScanVsGrep(t *testing.T) {
	mb := 4
	if v := os.Getenv("FAULTLINE_SCAN_BENCH_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil || mb <= 0 {
			t.Fatalf("FAULTLINE_SCAN_BENCH_MB=%q: want a positive number of megabytes", v)
		}
	}
	grep, err := exec.LookPath("grep")
	if err != nil {
		t.Fatalf("GNU grep is the baseline and must be installed: %v", err)
	}
	if v, err := exec.Command(grep, "--version").Output(); err != nil || !strings.Contains(string(v), "GNU grep") {
		t.Fatalf("%s is not GNU grep (%v): %s", grep, err, v)
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "kern.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeKernLog(f, int64(mb)<<20, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	patPath := filepath.Join(dir, "patterns")
	if err := os.WriteFile(patPath, []byte(strings.Join(grepPatterns, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}

	// Each run reports its wall time and the CPU time it used (user and system):
	// on a shared machine the CPU time is the steadier measure.
	runGrep := func() (wall, cpu time.Duration, lines int) {
		out, err := os.Create(filepath.Join(dir, "grep.out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := exec.Command(grep, "-E", "-f", patPath, logPath)
		cmd.Stdout = out
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("grep: %v", err)
		}
		wall = time.Since(start)
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), countLines(t, out.Name())
	}
	runScan := func() (wall, cpu time.Duration, lines int) {
		out, err := os.Create(filepath.Join(dir, "scan.out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := newRoot()
		cmd.SetOut(out)
		cmd.SetErr(out)
		cmd.SetArgs([]string{"scan", logPath})
		runtime.GC()
		start, cpu0 := time.Now(), processCPU(t)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("scan: %v", err)
		}
		wall, cpu = time.Since(start), processCPU(t)-cpu0
		return wall, cpu, countLines(t, out.Name())
	}
	// Alternate the two and keep each one's best, so a neighbour's burst of load on
	// a shared machine does not decide the ratio.
	best := func(a, b time.Duration) time.Duration {
		if a == 0 || b < a {
			return b
		}
		return a
	}
	var grepWall, grepCPU, scanWall, scanCPU time.Duration
	var grepLines, scanLines int
	for i := 0; i < 3; i++ {
		gw, gc, gl := runGrep()
		sw, sc, sl := runScan()
		grepWall, grepCPU, scanWall, scanCPU = best(grepWall, gw), best(grepCPU, gc), best(scanWall, sw), best(scanCPU, sc)
		grepLines, scanLines = gl, sl
	}
	if grepLines == 0 || scanLines == 0 {
		t.Fatalf("grep printed %d lines and scan %d: the generated log has faults for both", grepLines, scanLines)
	}
	mbs := func(d time.Duration) float64 { return float64(fi.Size()) / (1 << 20) / d.Seconds() }
	t.Logf("log %d MiB; grep -E with %d patterns: wall %v (%.0f MiB/s), cpu %v (%.0f MiB/s), %d lines out",
		fi.Size()>>20, len(grepPatterns), grepWall, mbs(grepWall), grepCPU, mbs(grepCPU), grepLines)
	t.Logf("faultline scan, %d rules: wall %v (%.0f MiB/s), cpu %v (%.0f MiB/s), %d lines out",
		rulesCount(t), scanWall, mbs(scanWall), scanCPU, mbs(scanCPU), scanLines)
	t.Logf("scan/grep throughput ratio: wall %.2f, cpu %.2f", grepWall.Seconds()/scanWall.Seconds(), grepCPU.Seconds()/scanCPU.Seconds())
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rulesCount(t *testing.T) int {
	e, err := packLayers{defaults: true}.load(forMatching)
	if err != nil {
		t.Fatal(err)
	}
	return len(e.Set().Rules)
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// BenchmarkScan is the per-line path of TestScanVsGrep without the process around
// it: the default packs over 16 MiB of the same generated kernel log, from memory,
// on one goroutine, for profiles (go test -bench Scan -cpuprofile).
func BenchmarkScan(b *testing.B) {
	var log bytes.Buffer
	if err := writeKernLog(&log, 16<<20, 1); err != nil {
		b.Fatal(err)
	}
	set, err := packLayers{defaults: true}.load(forMatching)
	if err != nil {
		b.Fatal(err)
	}
	eng := set.Engine
	b.SetBytes(int64(log.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		matches := 0
		sc := scan.New(eng, scan.Options{Workers: 1, Year: 2026})
		if err := sc.Scan(context.Background(), bytes.NewReader(log.Bytes()), func(scan.Match) error { matches++; return nil }); err != nil {
			b.Fatal(err)
		}
		if matches == 0 {
			b.Fatal("no match in the generated log")
		}
	}
}

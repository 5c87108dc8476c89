package exporter_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// discardReceiver acknowledges every push without decoding it, so a measurement
// sees the exporter's cost, not the receiver's.
func discardReceiver(t testing.TB) (string, *atomic.Int64) {
	var bytes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		bytes.Add(n)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &bytes
}

// writeRecords writes n realistic kernel records to a kmsg-format file.
func writeRecords(t testing.TB, path string, n int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	msgs := []string{
		"usb 1-1: new high-speed USB device number %d using xhci_hcd",
		"IPv6: ADDRCONF(NETDEV_CHANGE): veth%d: link becomes ready",
		"cni0: port %d(vethc0ffee) entered forwarding state",
		"NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python3, Graphics Exception: ESR 0x504648=0x11f000e",
	}
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "%d,%d,%d,-;", 6, i, int64(i)*1000)
		fmt.Fprintf(w, msgs[i%len(msgs)], i)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// BenchmarkPipeline: records/s read from a kmsg file, parsed, batched, encoded
// (Loki push, snappy) and acknowledged, with positions committed. Run with -cpu 1
// for the one-core figure.
func BenchmarkPipeline(b *testing.B) {
	const n = 200000
	dir := b.TempDir()
	path := filepath.Join(dir, "kmsg")
	writeRecords(b, path, n)
	url, _ := discardReceiver(b)
	boot := bootIDFile(b, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000b1")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		statePath := filepath.Join(dir, fmt.Sprintf("state-%d.json", i))
		ex, err := exporter.New(exporter.Config{Node: "bench", KmsgPath: path, BootIDPath: boot, BootTime: time.Now(),
			StatePath: statePath, Sender: ship.NewLoki(url, ship.LokiOptions{}), BatchSize: 1000, PollInterval: time.Millisecond,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ex.Run(ctx) }()
		eventually.True(b, time.Minute, "all records shipped", func() bool { return acked(statePath) == n })
		cancel()
		<-done
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// TestExporterRSS runs the exporter binary on one core shipping 500,000 records to
// a receiver that acknowledges everything, samples its resident memory, and reports
// throughput and peak RSS. Memory is checked against a loose bound that catches
// leaks and unbounded buffering, not against the machine's speed.
func TestExporterRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("performance measurement: run without -short")
	}
	const n = 500000
	bin := testenv.BuildFaultline(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "kmsg")
	writeRecords(t, path, n)
	url, sent := discardReceiver(t)
	statePath := filepath.Join(dir, "state.json")
	t0 := time.Now()
	pid := startExporterProcess(t, bin, "--node", "rss", "--kmsg-path", path,
		"--boot-id-path", bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000b2"), "--state-file", statePath,
		"--loki-url", url, "--listen", "127.0.0.1:0", "--batch-size", "1000")
	// Memory is sampled while records are being shipped, i.e. from the first
	// acknowledged batch on; start-up (every linked package's init) is reported apart.
	var peak, peakAnon int64
	eventually.True(t, 2*time.Minute, "all records shipped", func() bool {
		seq := acked(statePath)
		if seq > 0 {
			peak = max(peak, testenv.RSS(pid))
			peakAnon = max(peakAnon, testenv.RSSAnon(pid))
		}
		return seq == n
	})
	el := time.Since(t0)
	t.Logf("exporter on one core (GOMAXPROCS=1): %d records in %s = %.0f records/s, %d MB sent; peak resident memory (VmRSS) while shipping %.1f MiB (anonymous memory peak %.1f MiB, the rest is resident pages of the faultline binary); high-water mark of the whole run, start-up included, %.1f MiB",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), sent.Load()>>20, float64(peak)/(1<<20), float64(peakAnon)/(1<<20), float64(hwm(t, pid))/(1<<20))
	if peak == 0 {
		t.Fatal("no memory sample taken while shipping")
	}
	if hw := hwm(t, pid); hw >= chartMemoryLimit {
		t.Errorf("resident-set high-water mark %.1f MiB: over the chart's memory limit of %d MiB", float64(hw)/(1<<20), chartMemoryLimit>>20)
	}
}

// chartMemoryLimit is the exporter's memory limit in the chart
// (helm/faultline/values.yaml, exporter.resources.limits.memory).
const chartMemoryLimit = 128 << 20

// hwm is the process's resident-set high-water mark (VmHWM) in bytes.
func hwm(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

// TestExporterFloodRSS is the flood of the issue that lost an Xid line and crashed the
// exporter: 600 pod lines of 200 KB, and one Xid 79 written while they are shipped,
// against a receiver that answers 413 to any request over 128 KiB. The exporter
// binary must ship the Xid line, every pod line (cut, since none fits alone), and
// stay under the chart's 128 MiB memory limit: its resident-set high-water mark
// (VmHWM, from /proc: anonymous memory plus the binary's resident pages, what the
// container is charged for of this process) is checked against it.
func TestExporterFloodRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("performance measurement: run without -short")
	}
	const (
		lines    = 600
		lineSize = 200_000
		limit    = 128 << 10
	)
	bin := testenv.BuildFaultline(t)
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	root := writeFlood(t, dir, lines, lineSize)

	var (
		mu        sync.Mutex
		pods      int
		xidAt     time.Time
		podsAtXid int
		cut       int
	)
	srv := newFakeReceiver(t, func(p pushed) int {
		if p.Bytes > limit {
			return http.StatusRequestEntityTooLarge
		}
		mu.Lock()
		defer mu.Unlock()
		for i, l := range p.Lines {
			switch {
			case p.Source[i] == ship.SourceKernel && l == xid79:
				xidAt, podsAtXid = time.Now(), pods
			case p.Source[i] == ship.SourcePod:
				pods++
				if strings.HasSuffix(l, cri.TruncationMark) {
					cut++
				}
			}
		}
		return http.StatusNoContent
	})
	pid := startExporterProcess(t, bin, "--node", "flood", "--kmsg-path", k.path,
		"--boot-id-path", bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000b3"), "--state-file", filepath.Join(dir, "state.json"),
		"--loki-url", srv, "--listen", "127.0.0.1:0", "--pod-logs", root, "--max-backoff", "200ms")
	var peak, peakAnon int64
	sample := func() {
		peak = max(peak, testenv.RSS(pid))
		peakAnon = max(peakAnon, testenv.RSSAnon(pid))
	}
	eventually.True(t, time.Minute, "the pod flood being shipped", func() bool {
		sample()
		mu.Lock()
		defer mu.Unlock()
		return pods >= 10
	})
	written := time.Now()
	k.write(3, xid79)
	eventually.True(t, 5*time.Minute, "the Xid line and every pod line", func() bool {
		sample()
		mu.Lock()
		defer mu.Unlock()
		return !xidAt.IsZero() && pods >= lines
	})
	hw := hwm(t, pid)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("600 pod lines of 200 KB + 1 Xid against 413 over %d KiB: Xid shipped %s after it was written (%d pod lines shipped before it); %d pod lines shipped, %d cut; peak VmRSS %.1f MiB (anonymous %.1f MiB), VmHWM %.1f MiB; chart limit %d MiB",
		limit>>10, xidAt.Sub(written).Round(time.Millisecond), podsAtXid, pods, cut, float64(peak)/(1<<20), float64(peakAnon)/(1<<20), float64(hw)/(1<<20), chartMemoryLimit>>20)
	if pods != lines || cut != lines {
		t.Errorf("pod lines shipped %d (cut %d), want %d, all cut", pods, cut, lines)
	}
	if hw >= chartMemoryLimit {
		t.Errorf("resident-set high-water mark %.1f MiB: over the chart's memory limit of %d MiB", float64(hw)/(1<<20), chartMemoryLimit>>20)
	}
}

// writeFlood writes n pod log lines of size bytes each under dir/pods and returns
// the pod log root.
func writeFlood(t *testing.T, dir string, n, size int) string {
	t.Helper()
	root := filepath.Join(dir, "pods")
	f, err := os.Create(podLog(t, root))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rnd := rand.New(rand.NewPCG(3, 4))
	for range n {
		if _, err := f.WriteString(criLine("stdout", "F", noise(rnd, size))); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// startExporterProcess runs `faultline dmesg-exporter args...` on one core until the
// test ends and returns its pid.
func startExporterProcess(t *testing.T, bin string, args ...string) int {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"dmesg-exporter"}, args...)...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = &testWriter{t: t, prefix: "exporter: "}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// TestExporterFloodRefused: the same flood against a receiver that answers 400 to
// every request holding pod lines. The pod lines wait, unacknowledged, within the pod
// lane's byte bound; the Xid line is shipped; /healthz fails saying the receiver
// refuses pod records; the resident-set high-water mark stays under the chart's limit.
func TestExporterFloodRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("performance measurement: run without -short")
	}
	bin := testenv.BuildFaultline(t)
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	root := writeFlood(t, dir, 600, 200_000)
	var got collected
	srv := newFakeReceiver(t, func(p pushed) int {
		if len(p.kernelLines()) < len(p.Lines) {
			return http.StatusBadRequest
		}
		got.add(p)
		return http.StatusNoContent
	})
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePorts(t, 1)[0])
	statePath := filepath.Join(dir, "state.json")
	pid := startExporterProcess(t, bin, "--node", "flood-400", "--kmsg-path", k.path,
		"--boot-id-path", bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000b4"), "--state-file", statePath,
		"--loki-url", srv, "--listen", listen, "--pod-logs", root, "--max-backoff", "200ms")
	eventually.NoError(t, time.Minute, "/healthz failing for the refused pod lines", func() error {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "refuses pod records") {
			return fmt.Errorf("%s: %s", resp.Status, b)
		}
		return nil
	})
	k.write(3, xid79)
	eventually.True(t, 30*time.Second, "the Xid line", func() bool {
		kernel, _ := got.get()
		return slices.Contains(kernel, xid79)
	})
	// Alive all the while: the liveness probe must not restart an exporter that
	// waits for its receiver.
	if resp, err := http.Get("http://" + listen + "/livez"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/livez while the receiver refuses: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// Let the pod reader fill its lane while the receiver keeps refusing.
	var peak, peakAnon int64
	for range 100 {
		peak = max(peak, testenv.RSS(pid))
		peakAnon = max(peakAnon, testenv.RSSAnon(pid))
		time.Sleep(20 * time.Millisecond)
	}
	hw := hwm(t, pid)
	t.Logf("600 pod lines of 200 KB refused with 400 + 1 Xid: peak VmRSS %.1f MiB (anonymous %.1f MiB), VmHWM %.1f MiB; chart limit %d MiB",
		float64(peak)/(1<<20), float64(peakAnon)/(1<<20), float64(hw)/(1<<20), chartMemoryLimit>>20)
	if _, pod := got.get(); len(pod) != 0 {
		t.Errorf("%d pod lines accepted by a receiver that refuses them all", len(pod))
	}
	if st, err := state.Open(statePath); err != nil || len(st.Get().Pods) != 0 {
		t.Errorf("pod position saved although no pod line was accepted: %+v (%v)", st.Get().Pods, err)
	}
	if hw >= chartMemoryLimit {
		t.Errorf("resident-set high-water mark %.1f MiB: over the chart's memory limit of %d MiB", float64(hw)/(1<<20), chartMemoryLimit>>20)
	}
}

package exporter_test

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/podlogs"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

const xid79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."

// podDir creates a container log directory under root and returns its 0.log path.
func podLog(t *testing.T, root string) string {
	t.Helper()
	d := filepath.Join(root, "train_llm-0_6f1c2b7e-0000-4000-8000-000000000001", "trainer")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, "0.log")
}

// noise returns n bytes of letters snappy cannot shrink much, so a request's size
// on the wire is close to its lines' size.
func noise(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

// collected is what a scripted receiver accepted, by source.
type collected struct {
	mu     sync.Mutex
	kernel []string
	pod    []string
}

func (c *collected) add(p pushed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range p.Lines {
		if p.Source[i] == ship.SourceKernel {
			c.kernel = append(c.kernel, l)
		} else {
			c.pod = append(c.pod, l)
		}
	}
}

func (c *collected) get() (kernel, pod []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.kernel), slices.Clone(c.pod)
}

// TestRefusedPodLinesDoNotHoldKernelLines: the receiver answers 400 to every request
// with pod lines. The kernel's Xid line still arrives, /healthz says the receiver
// refuses pod records, and the pod position does not move; once the receiver accepts,
// every pod line arrives once, in order, and the exporter is healthy again.
func TestRefusedPodLinesDoNotHoldKernelLines(t *testing.T) {
	var got collected
	var mu sync.Mutex
	refuse := true
	srv := newFakeReceiver(t, func(p pushed) int {
		mu.Lock()
		defer mu.Unlock()
		if refuse && len(p.kernelLines()) < len(p.Lines) {
			return http.StatusBadRequest
		}
		got.add(p)
		return http.StatusNoContent
	})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	root := filepath.Join(dir, "pods")
	log0 := podLog(t, root)
	want := []string{"step 1 loss 2.5", "step 2 loss 2.4", "step 3 loss 2.3"}
	appendFile(t, log0, "not a CRI line\n") // skipped, and counted
	for _, m := range want {
		appendFile(t, log0, criLine("stdout", "F", m))
	}
	statePath := filepath.Join(dir, "state.json")
	reg := prometheus.NewRegistry()
	m := exporter.NewMetrics(reg)
	r := start(t, exporter.Config{Node: "n9", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000a1"),
		BootTime: k.boot, StatePath: statePath, Sender: ship.NewLoki(srv, ship.LokiOptions{}), Metrics: m,
		PodLogs: &podlogs.Config{Root: root, PollInterval: 20 * time.Millisecond, RescanInterval: 50 * time.Millisecond}})

	// Healthy's nil (nothing refused yet) is not the state waited for: it must say
	// the pod records are refused.
	eventually.NoError(t, 10*time.Second, "/healthz reporting the refusal", func() error {
		err := r.ex.Healthy()
		if err == nil {
			return errors.New("healthy: no refusal reported yet")
		}
		if !strings.Contains(err.Error(), "refuses pod records") {
			return err
		}
		return nil
	})
	k.write(3, xid79)
	eventually.True(t, 10*time.Second, "the Xid line while pod lines are refused", func() bool {
		kernel, _ := got.get()
		return slices.Contains(kernel, xid79)
	})
	if st, err := state.Open(statePath); err != nil || len(st.Get().Pods) != 0 {
		t.Fatalf("pod position saved while the receiver refused every pod line: %+v (%v)", st.Get().Pods, err)
	}
	if v := testutil.ToFloat64(m.Refusals(ship.SourcePod, "400")); v < 1 {
		t.Errorf("pod 400 refusals = %v, want >= 1", v)
	}
	if v := testutil.ToFloat64(m.Refusing(ship.SourcePod)); v != 1 {
		t.Errorf("receiver_refusing{source=pod} = %v, want 1", v)
	}

	mu.Lock()
	refuse = false
	mu.Unlock()
	eventually.True(t, 20*time.Second, "the pod lines once the receiver accepts them", func() bool {
		_, pod := got.get()
		return len(pod) >= len(want)
	})
	eventually.NoError(t, 5*time.Second, "healthy again", r.ex.Healthy)
	if _, pod := got.get(); !slices.Equal(pod, want) {
		t.Fatalf("pod lines %q, want %q", pod, want)
	}
	fi, err := os.Stat(log0)
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "the pod position at the end of the file", func() bool {
		st, err := state.Open(statePath)
		return err == nil && st.Get().Pods[log0].Offset == fi.Size()
	})
	if v := testutil.ToFloat64(m.Refusing(ship.SourcePod)); v != 0 {
		t.Errorf("receiver_refusing{source=pod} = %v after the refusals ended, want 0", v)
	}
	if v := sum(t, reg, "faultline_exporter_pod_files"); v != 1 {
		t.Errorf("pod_files = %v, want 1", v)
	}
	if v := sum(t, reg, "faultline_exporter_pod_lines_malformed_total"); v != 1 {
		t.Errorf("pod_lines_malformed_total = %v, want 1", v)
	}
}

// TestTooLargeSplitsAndCuts: a receiver refuses requests over 64 KiB with 413. Batches
// of 1 MiB are split until they pass; a pod line too large on its own arrives cut,
// with the truncation mark; kernel lines all arrive; nothing is dropped.
func TestTooLargeSplitsAndCuts(t *testing.T) {
	const limit = 64 << 10
	var got collected
	var mu sync.Mutex
	largest := 0
	srv := newFakeReceiver(t, func(p pushed) int {
		if p.Bytes > limit {
			return http.StatusRequestEntityTooLarge
		}
		mu.Lock()
		largest = max(largest, p.Bytes)
		mu.Unlock()
		got.add(p)
		return http.StatusNoContent
	})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	root := filepath.Join(dir, "pods")
	log0 := podLog(t, root)
	rnd := rand.New(rand.NewPCG(1, 2))
	var want []string
	var b strings.Builder
	for i := range 40 {
		n := 20 << 10
		if i%10 == 9 {
			n = 150 << 10 // too large alone: cut to 75 KiB (still refused), then 37.5 KiB
		}
		m := noise(rnd, n)
		want = append(want, m)
		b.WriteString(criLine("stdout", "F", m))
	}
	appendFile(t, log0, b.String())
	var kernel []string
	for i := range 200 {
		kernel = append(kernel, "pcieport 0000:00:02.0: AER: Corrected error received #"+noise(rnd, 8)+string(rune('a'+i%26)))
	}
	k.write(4, kernel...)
	reg := prometheus.NewRegistry()
	m := exporter.NewMetrics(reg)
	start(t, exporter.Config{Node: "n10", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000a2"),
		BootTime: k.boot, StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewLoki(srv, ship.LokiOptions{}), Metrics: m,
		PodLogs: &podlogs.Config{Root: root, PollInterval: 20 * time.Millisecond, RescanInterval: 50 * time.Millisecond}})
	eventually.True(t, 30*time.Second, "every line", func() bool {
		k, p := got.get()
		return len(k) >= len(kernel) && len(p) >= len(want)
	})
	gotKernel, gotPod := got.get()
	if !slices.Equal(gotKernel, kernel) {
		t.Errorf("kernel lines: got %d, want the %d in order", len(gotKernel), len(kernel))
	}
	if len(gotPod) != len(want) {
		t.Fatalf("pod lines: got %d, want %d", len(gotPod), len(want))
	}
	cut := 0
	for i, w := range want {
		g := gotPod[i]
		if len(w) <= limit {
			if g != w {
				t.Errorf("pod line %d (%d bytes) changed on the way (%d bytes)", i, len(w), len(g))
			}
			continue
		}
		cut++
		head, ok := strings.CutSuffix(g, cri.TruncationMark)
		if !ok || !strings.HasPrefix(w, head) || len(g) > limit {
			t.Errorf("pod line %d (%d bytes): got %d bytes, want a marked prefix under %d", i, len(w), len(g), limit)
		}
	}
	if v := testutil.ToFloat64(m.Splits(ship.SourcePod)); v < 1 {
		t.Errorf("pod batch splits = %v, want >= 1", v)
	}
	if v := testutil.ToFloat64(m.Cut(ship.SourcePod)); v != float64(2*cut) {
		t.Errorf("pod records cut = %v, want %d (each of the %d long lines cut twice)", v, 2*cut, cut)
	}
	if v := testutil.ToFloat64(m.Dropped("too_large")); v != 0 {
		t.Errorf("dropped too_large = %v, want 0", v)
	}
	// Every byte read was acknowledged: the lanes hold nothing any more.
	eventually.True(t, 5*time.Second, "buffer_bytes back to 0", func() bool { return sum(t, reg, "faultline_exporter_buffer_bytes") == 0 })
	mu.Lock()
	defer mu.Unlock()
	t.Logf("largest accepted request %d bytes (limit %d)", largest, limit)
}

// TestTooLargeEvenShort: a receiver that refuses every request for its size gets no
// record through; each is cut to the floor, then dropped and counted, and the kernel
// position moves on instead of holding the node's log forever.
func TestTooLargeEvenShort(t *testing.T) {
	srv := newFakeReceiver(t, func(p pushed) int { return http.StatusRequestEntityTooLarge })
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	k.write(3, xid79, "second line")
	statePath := filepath.Join(dir, "state.json")
	m := exporter.NewMetrics(prometheus.NewRegistry())
	start(t, exporter.Config{Node: "n11", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000a3"),
		BootTime: k.boot, StatePath: statePath, Sender: ship.NewLoki(srv, ship.LokiOptions{}), Metrics: m})
	eventually.True(t, 10*time.Second, "both records given up", func() bool { return acked(statePath) == 2 })
	if v := testutil.ToFloat64(m.Dropped("too_large")); v != 2 {
		t.Errorf("dropped too_large = %v, want 2", v)
	}
	if v := testutil.ToFloat64(m.Shipped(ship.SourceKernel)); v != 0 {
		t.Errorf("shipped = %v, want 0", v)
	}
}

// TestLongPodLineReachesLoki: a pod line longer than the tailer's cap is cut by the
// tailer and must then pass the real Loki's own line size limit (max_line_size,
// 256 KB by default): shipped cut, not refused, and the kernel line after it arrives.
func TestLongPodLineReachesLoki(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	root := filepath.Join(dir, "pods")
	log0 := podLog(t, root)
	long := noise(rand.New(rand.NewPCG(5, 6)), 300_000)
	appendFile(t, log0, criLine("stdout", "F", long)+criLine("stdout", "F", "after the long line"))
	r := start(t, exporter.Config{Node: "n12", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000a4"),
		BootTime: k.boot, StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewLoki(env.LokiURL(), ship.LokiOptions{}),
		PodLogs: &podlogs.Config{Root: root, PollInterval: 20 * time.Millisecond, RescanInterval: 50 * time.Millisecond}})
	k.write(3, xid79)
	got := testenv.WaitLoki(t, env.LokiURL(), `{node="n12"}`, 3, 20*time.Second)
	var cut string
	for _, e := range got {
		if strings.HasSuffix(e.Line, cri.TruncationMark) {
			cut = e.Line
		}
	}
	if !strings.HasPrefix(long, strings.TrimSuffix(cut, cri.TruncationMark)) || len(cut) < 200_000 {
		t.Errorf("long line in Loki: %d bytes, want a cut prefix of the line", len(cut))
	}
	if err := r.ex.Healthy(); err != nil {
		t.Errorf("unhealthy: %v", err)
	}
}

// TestMaxAgeDropsRecordsLokiRefusesForGood: on a node up for 30 days, the ring buffer's
// first records are older than Loki keeps accepting; they are dropped when read, and
// counted, instead of holding the kernel source behind a refusal that never ends.
func TestMaxAgeDropsRecordsLokiRefusesForGood(t *testing.T) {
	var got collected
	srv := newFakeReceiver(t, func(p pushed) int {
		got.add(p)
		return http.StatusNoContent
	})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	k.boot = time.Now().Add(-30 * 24 * time.Hour)
	appendFile(t, k.path, "6,1,1000,-;Linux version 6.8.0 (boot, 30 days ago)\n6,2,2000,-;pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200\n")
	k.seq = 2
	k.write(3, xid79) // now
	m := exporter.NewMetrics(prometheus.NewRegistry())
	start(t, exporter.Config{Node: "n13", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000a5"),
		BootTime: k.boot, StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewLoki(srv, ship.LokiOptions{}),
		Metrics: m, MaxAge: 167 * time.Hour})
	eventually.True(t, 10*time.Second, "the Xid line", func() bool {
		kernel, _ := got.get()
		return len(kernel) > 0
	})
	if kernel, _ := got.get(); !slices.Equal(kernel, []string{xid79}) {
		t.Errorf("shipped %q, want only the Xid line", kernel)
	}
	if v := testutil.ToFloat64(m.Dropped("too_old")); v != 2 {
		t.Errorf("dropped too_old = %v, want 2", v)
	}
}

// TestCollectorBodyLimit: the real collector with a 64 KiB max_request_body_size
// refuses larger requests with a 400 that says "request body too large" (not a
// 413). The exporter splits the batches, cuts the pod lines too long on their own,
// and every line reaches Loki through the collector: the Xid line whole, the 200 KB
// pod lines cut with the truncation mark.
func TestCollectorBodyLimit(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Collector: true, CollectorMaxRequestBody: 64 << 10})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	root := filepath.Join(dir, "pods")
	log0 := podLog(t, root)
	rnd := rand.New(rand.NewPCG(7, 8))
	var b strings.Builder
	var want []string
	for range 20 {
		m := noise(rnd, 200_000)
		want = append(want, m)
		b.WriteString(criLine("stdout", "F", m))
	}
	appendFile(t, log0, b.String())
	reg := prometheus.NewRegistry()
	m := exporter.NewMetrics(reg)
	r := start(t, exporter.Config{Node: "n14", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000a6"),
		BootTime: k.boot, StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewOTLP(env.OTLPEndpoint(), ship.OTLPOptions{Gzip: true}),
		Metrics: m, PodLogs: &podlogs.Config{Root: root, PollInterval: 20 * time.Millisecond, RescanInterval: 50 * time.Millisecond}})
	k.write(3, xid79)
	if got := testenv.WaitLoki(t, env.LokiURL(), `{node="n14", source="kernel"}`, 1, 30*time.Second); got[0].Line != xid79 {
		t.Errorf("kernel line %q, want the Xid line", got[0].Line)
	}
	got := testenv.WaitLoki(t, env.LokiURL(), `{node="n14", source="pod"}`, len(want), 60*time.Second)
	seen := map[string]bool{}
	for _, e := range got {
		head, ok := strings.CutSuffix(e.Line, cri.TruncationMark)
		if !ok {
			t.Errorf("pod line of %d bytes in Loki not cut", len(e.Line))
			continue
		}
		for _, w := range want {
			if strings.HasPrefix(w, head) {
				seen[w] = true
			}
		}
	}
	if len(seen) != len(want) || len(got) != len(want) {
		t.Errorf("Loki holds %d pod lines matching %d of the %d written", len(got), len(seen), len(want))
	}
	if v := testutil.ToFloat64(m.Refusals(ship.SourcePod, "400")); v < 1 {
		t.Errorf("pod 400 refusals = %v, want >= 1", v)
	}
	if v := testutil.ToFloat64(m.Cut(ship.SourcePod)); v < float64(len(want)) {
		t.Errorf("pod records cut = %v, want >= %d", v, len(want))
	}
	if err := r.ex.Healthy(); err != nil {
		t.Errorf("unhealthy after the refusals were handled: %v", err)
	}
}

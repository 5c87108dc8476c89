package exporter_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// kmsgFile is a file in /dev/kmsg's record format that a test appends to, as the
// kernel would.
type kmsgFile struct {
	t    *testing.T
	path string
	boot time.Time
	mu   sync.Mutex
	seq  uint64
}

func newKmsgFile(t *testing.T, dir string) *kmsgFile {
	p := filepath.Join(dir, "kmsg")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Boot an hour ago, so record times are close to now and Loki accepts them.
	return &kmsgFile{t: t, path: p, boot: time.Now().Add(-time.Hour).Truncate(time.Second)}
}

// write appends records with the given messages and returns their seqs.
func (k *kmsgFile) write(level int, msgs ...string) []uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, err := os.OpenFile(k.path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		k.t.Fatal(err)
	}
	defer f.Close()
	var seqs []uint64
	for _, m := range msgs {
		k.seq++
		usec := time.Since(k.boot).Microseconds()
		if _, err := fmt.Fprintf(f, "%d,%d,%d,-;%s\n", level, k.seq, usec, m); err != nil {
			k.t.Fatal(err)
		}
		seqs = append(seqs, k.seq)
	}
	return seqs
}

func bootIDFile(t testing.TB, dir, id string) string {
	p := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// queryLoki runs a LogQL query over the last two hours, all entries in time order.
func queryLoki(t *testing.T, base, q string) []testenv.LokiEntry {
	t.Helper()
	got, err := testenv.QueryLoki(t.Context(), base, q, time.Now().Add(-2*time.Hour), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// running is an exporter running in the test process.
type running struct {
	*testenv.Background
	ex *exporter.Exporter
}

func start(t *testing.T, cfg exporter.Config) *running {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.BatchWait == 0 {
		cfg.BatchWait = 100 * time.Millisecond
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	cfg.Backoff = ship.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	ex, err := exporter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &running{Background: testenv.RunBackground(t, "exporter", 30*time.Second, ex.Run), ex: ex}
}

// acked returns the kernel seq the state file holds as acknowledged (0 when none).
func acked(path string) uint64 {
	st, err := state.Open(path)
	if err != nil {
		return 0
	}
	return st.Get().KmsgSeq
}

func linesOf(es []testenv.LokiEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Line
	}
	return out
}

// TestKmsgThroughCollectorToLoki: kmsg file → exporter → real collector → real Loki;
// the Xid line is found by its node label, and the delay from write to queryable is
// measured.
func TestKmsgThroughCollectorToLoki(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Collector: true})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	start(t, exporter.Config{Node: "n1", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-00000000000a"), BootTime: k.boot,
		StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewOTLP(env.OTLPEndpoint(), ship.OTLPOptions{Gzip: true})})
	k.write(6, "usb 1-1: new high-speed USB device number 2 using xhci_hcd")
	// A user-space record (facility 1): not shipped by default.
	k.write(14, "systemd[1]: Started Session 42 of user root.")
	var delays []time.Duration
	for i := 0; i < 5; i++ {
		msg := fmt.Sprintf("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus. #%d", i)
		t0 := time.Now()
		k.write(4, msg)
		got := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{k8s_node_name="n1"} |= %q`, msg), 1, 30*time.Second)
		if len(got) != 1 {
			t.Fatalf("line %d not in Loki", i)
		}
		delays = append(delays, time.Since(t0))
		if got[0].Labels["source"] != "kernel" || got[0].Labels["node"] != "n1" {
			t.Errorf("labels = %v", got[0].Labels)
		}
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	t.Logf("write → queryable in Loki via the collector: min %s, median %s, max %s (batch wait 100ms, collector batch 200ms)",
		delays[0].Round(time.Millisecond), delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond))
	all := queryLoki(t, env.LokiURL(), `{node="n1"}`)
	if len(all) != 6 {
		t.Fatalf("Loki holds %d lines for n1, want 6 (the user-space record is not shipped): %v", len(all), linesOf(all))
	}
	if got := queryLoki(t, env.LokiURL(), `{node="n1", source="kernel"} |= "Xid"`); len(got) != 5 {
		t.Fatalf(`{node="n1", source="kernel"} |= "Xid": %d lines`, len(got))
	}
}

// TestDirectLokiRestartExactlyOnce: direct push mode; the exporter is stopped in the
// middle of a stream and started again: every line is in Loki exactly once. Then a
// reboot (new boot id) ships the new boot's ring buffer from its start.
func TestDirectLokiRestartExactlyOnce(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	statePath := filepath.Join(dir, "state.json")
	bootID := bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-00000000000a")
	cfg := exporter.Config{Node: "n2", KmsgPath: k.path, BootIDPath: bootID, BootTime: k.boot, StatePath: statePath,
		Sender: ship.NewLoki(env.LokiURL(), ship.LokiOptions{}), BatchSize: 7}
	var msgs []string
	for i := 0; i < 300; i++ {
		msgs = append(msgs, fmt.Sprintf("pcieport 0000:00:02.0: AER: Corrected error received: 0000:00:02.0 #%03d", i))
	}
	k.write(4, msgs[:150]...)
	r := start(t, cfg)
	// Stop while it is shipping: once some but not all of the first half is acknowledged.
	eventually.True(t, 20*time.Second, "20 records acknowledged", func() bool { return acked(statePath) >= 20 })
	r.Stop(t)
	k.write(4, msgs[150:]...)
	start(t, cfg)
	got := testenv.WaitLoki(t, env.LokiURL(), `{node="n2", source="kernel"}`, 300, 30*time.Second)
	time.Sleep(500 * time.Millisecond) // anything extra would have arrived by now
	got = queryLoki(t, env.LokiURL(), `{node="n2", source="kernel"}`)
	if len(got) != 300 {
		t.Fatalf("Loki holds %d lines, want 300", len(got))
	}
	seen := map[string]int{}
	for _, e := range got {
		seen[e.Line]++
	}
	for _, m := range msgs {
		if seen[m] != 1 {
			t.Fatalf("%q in Loki %d times", m, seen[m])
		}
	}

	// A reboot: the ring buffer starts over with seq 1 and a new boot id. Lines the
	// kernel logged before the exporter started must be shipped.
	if err := os.WriteFile(k.path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	k.seq = 0
	k.write(3, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus. (new boot)")
	cfg.BootIDPath = bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-00000000000b")
	start(t, cfg)
	if got := testenv.WaitLoki(t, env.LokiURL(), `{node="n2"} |= "(new boot)"`, 1, 20*time.Second); len(got) != 1 {
		t.Fatalf("line of the new boot not shipped: %d", len(got))
	}
}

// TestLokiDown30s: Loki is stopped for 30 s; lines written meanwhile arrive after it
// returns, once each, and the exporter stays healthy while it waits.
func TestLokiDown30s(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	r := start(t, exporter.Config{Node: "n3", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-00000000000a"), BootTime: k.boot,
		StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewLoki(env.LokiURL(), ship.LokiOptions{})})
	k.write(6, "before the outage")
	if got := testenv.WaitLoki(t, env.LokiURL(), `{node="n3"}`, 1, 20*time.Second); len(got) != 1 {
		t.Fatal("first line not shipped")
	}
	env.StopLoki(t)
	for i := 0; i < 10; i++ {
		k.write(4, fmt.Sprintf("mlx5_core 0000:5e:00.0 ib0: Link down during the outage #%d", i))
		time.Sleep(3 * time.Second)
	}
	if err := r.ex.Healthy(); err != nil {
		t.Errorf("unhealthy while the receiver is down: %v", err)
	}
	env.StartLoki(t)
	got := testenv.WaitLoki(t, env.LokiURL(), `{node="n3"}`, 11, 30*time.Second)
	if len(got) != 11 {
		t.Fatalf("after the outage Loki holds %d lines, want 11: %v", len(got), linesOf(got))
	}
}

// TestBackPressure: with the receiver down, the buffer fills to its bound and the
// reader waits instead of growing memory; nothing is lost once it returns.
func TestBackPressure(t *testing.T) {
	var mu sync.Mutex
	var received []string
	down := true
	srv := newFakeReceiver(t, func(p pushed) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusServiceUnavailable
		}
		received = append(received, p.Lines...)
		return http.StatusNoContent
	})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	var msgs []string
	for i := 0; i < 200; i++ {
		msgs = append(msgs, fmt.Sprintf("line %d", i))
	}
	k.write(6, msgs...)
	start(t, exporter.Config{Node: "n4", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-00000000000c"), BootTime: k.boot,
		StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewLoki(srv, ship.LokiOptions{}), BufferSize: 10, BatchSize: 5})
	time.Sleep(time.Second) // the receiver stays down a while: the buffer fills
	mu.Lock()
	down = false
	mu.Unlock()
	eventually.True(t, 20*time.Second, "200 lines received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) >= 200
	})
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(received, "\n") != strings.Join(msgs, "\n") {
		t.Fatalf("received %d lines (want the 200 in order)", len(received))
	}
}

package exporter_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/eventually"
)

func TestMetricsAndHealth(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := newFakeReceiver(t, func(p pushed) int {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return http.StatusTooManyRequests
		}
		return http.StatusNoContent
	})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	k.write(3, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "second line")
	k.write(14, "user space line") // facility 1: read, not shipped
	// A malformed record is counted and skipped.
	appendFile(t, k.path, "garbage without a header\n")
	k.write(6, "after the garbage")
	reg := prometheus.NewRegistry()
	r := start(t, exporter.Config{Node: "n7", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000f1"),
		BootTime: k.boot, StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewLoki(srv, ship.LokiOptions{}),
		Metrics: exporter.NewMetrics(reg)})
	eventually.True(t, 10*time.Second, "seq 4 shipped", func() bool { return sum(t, reg, "faultline_exporter_last_shipped_seq") >= 4 })
	if v := sum(t, reg, "faultline_exporter_records_shipped_total"); v != 3 {
		t.Errorf("shipped = %v, want 3 (two lines, the user-space one skipped, the garbage dropped, one more)", v)
	}
	for name, min := range map[string]float64{
		"faultline_exporter_records_read_total":    4,
		"faultline_exporter_send_retries_total":    1,
		"faultline_exporter_records_dropped_total": 1,
		"faultline_exporter_buffer_capacity":       1,
	} {
		if v := sum(t, reg, name); v < min {
			t.Errorf("%s = %v, want >= %v", name, v, min)
		}
	}
	if err := r.ex.Healthy(); err != nil {
		t.Errorf("unhealthy: %v", err)
	}
}

func TestHealthFailsWhenReaderDies(t *testing.T) {
	dir := t.TempDir()
	ex, err := exporter.New(exporter.Config{Node: "n8", KmsgPath: filepath.Join(dir, "missing"),
		BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000f2"), StatePath: filepath.Join(dir, "s.json"),
		Sender: ship.NewLoki("http://127.0.0.1:1", ship.LokiOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "kernel reader") {
		t.Fatalf("Run = %v", err)
	}
	if err := ex.Healthy(); err == nil {
		t.Fatal("healthy after the reader died")
	}
}

func sum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			}
		}
	}
	return total
}

package probelines

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
)

func TestFormat(t *testing.T) {
	res := probe.Result{Check: "nvml", Status: probe.StatusFail, Message: `found 7 GPUs, expected 8; 3: fail (NVLink 2 down (11 up))`,
		Values: map[string]float64{"gpus_expected": 8, "gpu_count": 7}}
	pass := probe.DeviceResult{ID: "0", Status: probe.StatusPass}
	pass.SetValue("nvlink_down", 0)
	fail := probe.DeviceResult{ID: "3", Status: probe.StatusFail}
	fail.SetValue("nvlink_up", 11)
	fail.SetValue("nvlink_down", 1)
	fail.SetValue("pcie_link_max_gbps", 31.5)
	fail.SetValue("big", 2e9)
	res.Devices = []probe.DeviceResult{pass, fail}
	want := `faultline-probe: check=nvml status=fail trigger=schedule gpu_count=7 gpus_expected=8 3/big=2000000000 3/nvlink_down=1 3/nvlink_up=11 3/pcie_link_max_gbps=31.5 message="found 7 GPUs, expected 8; 3: fail (NVLink 2 down (11 up))"`
	if got := Format(res, "schedule"); got != want {
		t.Errorf("Format:\n got %s\nwant %s", got, want)
	}
	bare := Format(probe.Result{Check: "pciebw", Status: probe.StatusPass}, "")
	if want := `faultline-probe: check=pciebw status=pass trigger=unknown message=""`; bare != want {
		t.Errorf("Format without values or trigger: %s, want %s", bare, want)
	}
	long := Format(probe.Result{Check: "dcgm", Status: probe.StatusFail, Message: strings.Repeat("é", 2000)}, "rule")
	if len(long) > maxMessage+200 || !strings.HasSuffix(long, `…"`) {
		t.Errorf("a long message is not cut short: %d bytes, ends %q", len(long), long[len(long)-10:])
	}
}

// TestLinesBounded: each check has its own bound, Report never waits for a receiver
// that does not take lines, and what is dropped is counted.
func TestLinesBounded(t *testing.T) {
	shipped := make(chan ship.Record)
	l, err := New(Config{Node: "gpu-1", Burst: 2, Queue: 3,
		Ship: func(ctx context.Context, r ship.Record) bool {
			select {
			case shipped <- r:
				return true
			case <-ctx.Done():
				return false
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for range 5 {
			l.Report(probe.Result{Check: "nvml", Status: probe.StatusFail}, "schedule")
		}
		for range 3 {
			l.Report(probe.Result{Check: "pciebw", Status: probe.StatusPass}, "manual")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Report waited for the receiver")
	}
	m := l.cfg.Metrics
	// nvml: 2 within its burst, 3 over it; pciebw: 2 within its burst, 1 over it, of
	// which the queue (3) takes one.
	if rate, queue := testutil.ToFloat64(m.dropped.WithLabelValues(dropRate)), testutil.ToFloat64(m.dropped.WithLabelValues(dropQueue)); rate != 4 || queue != 1 {
		t.Errorf("dropped: rate %v, queue %v; want 4 and 1", rate, queue)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	for i := range 3 {
		r := <-shipped
		if r.Source != ship.SourceProbe || r.Node != "gpu-1" || !strings.HasPrefix(r.Body, "faultline-probe: check=") {
			t.Errorf("line %d: %+v", i, r)
		}
		if want := levelErr; i < 2 && r.Level != want {
			t.Errorf("line %d: level %d, want %d for a failed check", i, r.Level, want)
		}
	}
}

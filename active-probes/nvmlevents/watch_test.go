//go:build cgo

package nvmlevents

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/eventually"
)

// TestXidEventLine: an Xid injected into go-nvml's mock becomes one line in the
// documented wording, with the GPU's PCI address and UUID, at level err, shipped
// with the labels of every line of the node: {node, source="nvml"}.
func TestXidEventLine(t *testing.T) {
	box := newGPUBox(t)
	var s sink
	m := NewMetrics(prometheus.NewRegistry())
	runWatcher(t, box.srv, Config{Ship: s.ship, Metrics: m})
	box.inject(2, nvml.EventTypeXidCriticalError, 79, noInstance)
	box.inject(5, nvml.EventTypeXidCriticalError, 31, 3)
	lines := s.awaitLines(t, 2)

	uuid2, _ := box.devices[2].GetUUID()
	want := "NVML: Xid 79 on GPU 0000:47:00.0 (" + uuid2 + ")"
	if lines[0].Text != want {
		t.Errorf("line %q, want %q", lines[0].Text, want)
	}
	if lines[0].Level != 3 || !lines[0].Time.Equal(t0) {
		t.Errorf("level %d time %v, want 3 (err) at %v", lines[0].Level, lines[0].Time, t0)
	}
	uuid5, _ := box.devices[5].GetUUID()
	if want := "NVML: Xid 31 on GPU 0000:90:00.0 (" + uuid5 + ") GPU instance 3"; lines[1].Text != want {
		t.Errorf("MIG line %q, want %q", lines[1].Text, want)
	}
	rec := lines[0].Record("gpu-1")
	if got := ship.LokiLabels(&rec); got != `{node="gpu-1", source="nvml"}` {
		t.Errorf("labels %s", got)
	}
	if rec.Body != want || !rec.Time.Equal(t0) || rec.Level != 3 {
		t.Errorf("record %+v", rec)
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues("xid")); got != 2 {
		t.Errorf("faultline_nvml_events_total{type=xid} = %v, want 2", got)
	}
	// Every GPU registered every watched type, one registration per type.
	box.mu.Lock()
	defer box.mu.Unlock()
	for i := range box.devices {
		if len(box.regs[i]) != len(watched) {
			t.Errorf("GPU %d registered %x, want each of the %d watched types alone", i, box.regs[i], len(watched))
		}
	}
}

// TestECCAndClockEventLines: the other watched types, each in its wording and level.
func TestECCAndClockEventLines(t *testing.T) {
	box := newGPUBox(t)
	var s sink
	runWatcher(t, box.srv, Config{Ship: s.ship})
	box.inject(0, nvml.EventTypeDoubleBitEccError, 0, noInstance)
	box.inject(0, nvml.EventTypeSingleBitEccError, 0, noInstance)
	box.inject(1, nvml.EventTypeClock, 0, noInstance)
	box.inject(1, nvml.EventTypePowerSourceChange, 0, noInstance)
	lines := s.awaitLines(t, 4)
	u0, _ := box.devices[0].GetUUID()
	u1, _ := box.devices[1].GetUUID()
	want := []Line{
		{t0, "NVML: double-bit ECC error on GPU 0000:07:00.0 (" + u0 + ")", 3},
		{t0, "NVML: single-bit ECC error on GPU 0000:07:00.0 (" + u0 + ")", 4},
		{t0, "NVML: clock change on GPU 0000:0f:00.0 (" + u1 + ")", 5},
		{t0, "NVML: power source change on GPU 0000:0f:00.0 (" + u1 + ")", 5},
	}
	if !slices.Equal(lines, want) {
		t.Errorf("lines\n%v\nwant\n%v", lines, want)
	}
}

// TestUnsupportedEventType: a type NVML does not support on the GPUs is left out and
// counted; the others are still watched. With none supported, Run says so.
func TestUnsupportedEventType(t *testing.T) {
	box := newGPUBox(t)
	box.refuse[nvml.EventTypeClock] = nvml.ERROR_NOT_SUPPORTED
	box.refuse[nvml.EventTypePowerSourceChange] = nvml.ERROR_NOT_SUPPORTED
	var s sink
	m := NewMetrics(prometheus.NewRegistry())
	runWatcher(t, box.srv, Config{Ship: s.ship, Metrics: m})
	box.inject(4, nvml.EventTypeXidCriticalError, 48, noInstance)
	s.awaitLines(t, 1)
	if got := testutil.ToFloat64(m.unsupported.WithLabelValues("clock")); got != 8 {
		t.Errorf("unsupported{type=clock} = %v, want 8 GPUs", got)
	}
	if got := testutil.ToFloat64(m.unsupported.WithLabelValues("xid")); got != 0 {
		t.Errorf("unsupported{type=xid} = %v, want 0", got)
	}

	none := newGPUBox(t)
	for _, w := range watched {
		none.refuse[w.mask] = nvml.ERROR_NOT_SUPPORTED
	}
	_, done := runWatcher(t, none.srv, Config{Ship: (&sink{}).ship})
	select {
	case err := <-done:
		if !errors.Is(err, ErrNothingToWatch) {
			t.Fatalf("Run = %v, want ErrNothingToWatch", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with nothing to watch")
	}
}

// TestLostGPU: NVML answers the wait with GPU_IS_LOST; the watcher finds the GPU
// that is lost and reports it once, however often the wait repeats it, and goes on
// delivering the other GPUs' events. A GPU lost at registration is reported too.
func TestLostGPU(t *testing.T) {
	box := newGPUBox(t)
	box.devices[3].GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	box.devices[6].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_GPU_IS_LOST }
	var s sink
	m := NewMetrics(prometheus.NewRegistry())
	runWatcher(t, box.srv, Config{Ship: s.ship, Metrics: m})
	for range 3 {
		box.queue <- delivery{ret: nvml.ERROR_GPU_IS_LOST}
	}
	box.inject(0, nvml.EventTypeXidCriticalError, 13, noInstance)
	lines := s.awaitLines(t, 3)
	u3, _ := box.devices[3].GetUUID()
	u6, _ := box.devices[6].GetUUID()
	u0, _ := box.devices[0].GetUUID()
	want := []string{
		"NVML: GPU 0000:b7:00.0 (" + u6 + ") is lost: fallen off the bus or otherwise inaccessible",
		"NVML: GPU 0000:4e:00.0 (" + u3 + ") is lost: fallen off the bus or otherwise inaccessible",
		"NVML: Xid 13 on GPU 0000:07:00.0 (" + u0 + ")",
	}
	eventually.True(t, 5*time.Second, "queue drained", func() bool { return len(box.queue) == 0 })
	time.Sleep(100 * time.Millisecond) // several more waits: no new line may come
	if got := s.texts(); !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
	if lines[0].Level != 3 {
		t.Errorf("lost line level %d, want 3", lines[0].Level)
	}
	if got := testutil.ToFloat64(m.lost); got != 2 {
		t.Errorf("faultline_nvml_gpus_lost_total = %v, want 2", got)
	}
}

// TestNoLibrary: a node without libnvidia-ml gives ErrNoNVML.
func TestNoLibrary(t *testing.T) {
	box := newGPUBox(t)
	box.srv.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	_, done := runWatcher(t, box.srv, Config{Ship: (&sink{}).ship})
	if err := <-done; !errors.Is(err, ErrNoNVML) {
		t.Fatalf("Run = %v, want ErrNoNVML", err)
	}
}

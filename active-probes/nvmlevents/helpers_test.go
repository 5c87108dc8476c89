//go:build cgo

package nvmlevents

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/faultline-dev/faultline/active-probes/checks/nvmlmock"
	"github.com/faultline-dev/faultline/test/eventually"
)

// delivery is one answer of the mock event set's Wait.
type delivery struct {
	data nvml.EventData
	ret  nvml.Return
}

// gpuBox is a DGX A100 from go-nvml's mock with an event set the test injects
// events into: Wait answers with the next injected delivery, or ERROR_TIMEOUT.
type gpuBox struct {
	srv     *dgxa100.Server
	queue   chan delivery
	mu      sync.Mutex
	regs    map[int][]uint64 // GPU index -> event types registered
	refuse  map[uint64]nvml.Return
	freed   bool
	devices []*dgxa100.Device
}

func newGPUBox(t *testing.T) *gpuBox {
	t.Helper()
	b := &gpuBox{srv: nvmlmock.HealthyDGXA100(), queue: make(chan delivery, 16), regs: map[int][]uint64{},
		refuse: map[uint64]nvml.Return{}}
	set := &mock.EventSet{
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case d := <-b.queue:
				return d.data, d.ret
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.freed = true
			return nvml.SUCCESS
		},
	}
	b.srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	for i, dd := range b.srv.Devices {
		d := dd.(*dgxa100.Device)
		b.devices = append(b.devices, d)
		d.RegisterEventsFunc = func(types uint64, s nvml.EventSet) nvml.Return {
			if s != set {
				t.Errorf("GPU %d: registered on another event set", i)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if ret, ok := b.refuse[types]; ok {
				return ret
			}
			b.regs[i] = append(b.regs[i], types)
			return nvml.SUCCESS
		}
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40, nvml.SUCCESS }
	}
	return b
}

// inject makes the next Wait deliver an event of GPU i.
func (b *gpuBox) inject(i int, typ, data uint64, gpuInstance uint32) {
	b.queue <- delivery{data: nvml.EventData{Device: b.srv.Devices[i], EventType: typ, EventData: data,
		GpuInstanceId: gpuInstance, ComputeInstanceId: noInstance}, ret: nvml.SUCCESS}
}

// sink collects the lines a watcher ships.
type sink struct {
	mu    sync.Mutex
	lines []Line
}

func (s *sink) ship(_ context.Context, l Line) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, l)
	return true
}

func (s *sink) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.lines))
	for i, l := range s.lines {
		out[i] = l.Text
	}
	return out
}

// awaitLines waits until the sink holds n lines and returns them.
func (s *sink) awaitLines(t *testing.T, n int) []Line {
	t.Helper()
	eventually.True(t, 5*time.Second, "lines shipped", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.lines) >= n
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Line(nil), s.lines...)
}

// runWatcher starts a watcher over the box and stops it at the test's end; the
// returned channel yields Run's error.
func runWatcher(t *testing.T, lib nvml.Interface, cfg Config) (*Watcher, <-chan error) {
	t.Helper()
	if cfg.Wait == 0 {
		cfg.Wait = 20 * time.Millisecond
	}
	if cfg.LostRetry == 0 {
		cfg.LostRetry = 20 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return t0 }
	}
	cfg.Log = slog.New(slog.DiscardHandler)
	w, err := New(lib, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- w.Run(ctx)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Error("watcher did not stop")
		}
	})
	return w, done
}

var t0 = time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)

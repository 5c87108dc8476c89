//go:build cgo

package nvmlevents

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/faultline-dev/faultline/active-probes/nvmlfield"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// eventType is one watched NVML event type.
type eventType struct {
	mask  uint64
	name  string // the metric's type label
	kind  string // the line's wording; "" for Xids
	level int
}

// watched are the event types the watcher registers on every GPU, one at a time:
// NVML registers none of a mask when it does not support one of its types.
var watched = []eventType{
	{nvml.EventTypeXidCriticalError, "xid", "", levelErr},
	{nvml.EventTypeDoubleBitEccError, "dbe", KindDoubleBitECC, levelErr},
	{nvml.EventTypeSingleBitEccError, "sbe", KindSingleBitECC, levelWarning},
	{nvml.EventTypeClock, "clock", KindClock, levelNotice},
	{nvml.EventTypePowerSourceChange, "power_source", KindPowerSource, levelNotice},
	// The types newer drivers added (an H200 on 580.159.04 supports each one; see
	// active-probes/checks/testdata/recorded/h200): older drivers refuse them, and
	// they are counted as unsupported there.
	{nvml.EventTypeSingleBitEccErrorStorm, "sbe_storm", KindSingleBitECCStorm, levelWarning},
	{nvml.EventTypeDramRetirementEvent, "dram_retirement", KindDRAMRetirement, levelWarning},
	{nvml.EventTypeDramRetirementFailure, "dram_retirement_failure", KindDRAMRetirementFailure, levelErr},
	{nvml.EventTypeNonFatalPoisonError, "poison", KindPoison, levelWarning},
	{nvml.EventTypeFatalPoisonError, "fatal_poison", KindFatalPoison, levelErr},
	{nvml.EventTypeGpuUnavailableError, "gpu_unavailable", KindGPUUnavailable, levelErr},
	{nvml.EventTypeGpuRecoveryAction, "recovery_action", kindRecovery, levelErr},
}

// kindRecovery marks the recovery-action event, whose line names the action.
const kindRecovery = "recovery"

// Watcher reads the events of every GPU of the node and ships them as lines.
type Watcher struct {
	lib  nvml.Interface
	cfg  Config
	gpus []*gpu
	// unknownLost stands for a loss no GPU could be named for, reported once.
	unknownLost gpu
	// lastClock is when each GPU's (by PCI address) last clock-change line went.
	lastClock map[string]time.Time
}

type gpu struct {
	dev  nvml.Device
	id   GPU
	lost bool
}

// New returns a watcher over an NVML implementation: the real library, or
// go-nvml's mock in tests.
func New(lib nvml.Interface, cfg Config) (*Watcher, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Watcher{lib: lib, cfg: cfg, lastClock: map[string]time.Time{}}, nil
}

// Open returns a watcher of the NVML library at path ("" for the dynamic loader's
// search path).
func Open(path string, cfg Config) (*Watcher, error) {
	var opts []nvml.LibraryOption
	if path != "" {
		opts = append(opts, nvml.WithLibraryPath(path))
	}
	return New(nvml.New(opts...), cfg)
}

// Run registers the watched event types on every GPU and ships each event until
// ctx is done. It returns ErrNoNVML without the library, ErrNothingToWatch when no
// GPU supports any watched type, and other errors when NVML fails to start.
func (w *Watcher) Run(ctx context.Context) error {
	switch ret := w.lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("%w: %v", ErrNoNVML, ret)
	default:
		return fmt.Errorf("nvml events: init: %v", ret)
	}
	defer w.lib.Shutdown()
	set, ret := w.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvml events: create the event set: %v", ret)
	}
	defer set.Free()
	registered, err := w.register(ctx, set)
	if err != nil {
		return err
	}
	if registered == 0 {
		return ErrNothingToWatch
	}
	w.cfg.Log.Info("watching NVML events", "gpus", len(w.gpus), "registrations", registered)
	for ctx.Err() == nil {
		data, ret := set.Wait(uint32(w.cfg.Wait / time.Millisecond))
		switch ret {
		case nvml.SUCCESS:
			if !w.event(ctx, data) {
				return nil
			}
		case nvml.ERROR_TIMEOUT:
		case nvml.ERROR_GPU_IS_LOST:
			// The wait does not say which GPU: ask each one still answering.
			if !w.findLost(ctx) || !w.pause(ctx) {
				return nil
			}
		default:
			w.cfg.Metrics.errors.WithLabelValues("EventSetWait").Inc()
			w.cfg.Log.Warn("waiting for NVML events failed", "err", ret)
			if !w.pause(ctx) {
				return nil
			}
		}
	}
	return nil
}

// register opens every GPU and registers each watched type on it, one at a time.
func (w *Watcher) register(ctx context.Context, set nvml.EventSet) (int, error) {
	n, ret := w.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("nvml events: count GPUs: %v", ret)
	}
	registered := 0
	unsupported := map[string][]string{}
	for i := 0; i < n; i++ {
		dev, ret := w.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			if ret == nvml.ERROR_GPU_IS_LOST && !w.reportLost(ctx, &gpu{id: GPU{PCI: fmt.Sprintf("index %d", i)}}) {
				return registered, ctx.Err()
			}
			w.cfg.Metrics.errors.WithLabelValues("DeviceGetHandleByIndex").Inc()
			w.cfg.Log.Warn("cannot open a GPU for events", "index", i, "err", ret)
			continue
		}
		g := &gpu{dev: dev, id: identify(dev)}
		w.gpus = append(w.gpus, g)
		for _, t := range watched {
			switch ret := dev.RegisterEvents(t.mask, set); ret {
			case nvml.SUCCESS:
				registered++
			case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
				// An NVML older than the type answers that it is not a type.
				w.cfg.Metrics.unsupported.WithLabelValues(t.name).Inc()
				unsupported[t.name] = append(unsupported[t.name], g.id.pci())
			case nvml.ERROR_GPU_IS_LOST:
				if !w.reportLost(ctx, g) {
					return registered, ctx.Err()
				}
			default:
				w.cfg.Metrics.errors.WithLabelValues("DeviceRegisterEvents").Inc()
				w.cfg.Log.Warn("cannot register an NVML event type", "gpu", g.id.pci(), "type", t.name, "err", ret)
			}
			if g.lost {
				break
			}
		}
	}
	for name, gpus := range unsupported {
		w.cfg.Log.Info("NVML event type not supported: those events cannot be seen there", "type", name, "gpus", strings.Join(gpus, ","))
	}
	return registered, nil
}

// identify reads a GPU's UUID and PCI address for its lines.
func identify(dev nvml.Device) GPU {
	var id GPU
	if v, ret := dev.GetUUID(); ret == nvml.SUCCESS {
		id.UUID = v
	}
	if pi, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		id.PCI = probe.NormalizePCI(busID(pi.BusId[:]))
	}
	return id
}

func busID(b []uint8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// event ships one event; false when ctx ended.
func (w *Watcher) event(ctx context.Context, d nvml.EventData) bool {
	g := w.byDevice(d.Device)
	now := w.cfg.Now()
	for _, t := range watched {
		if d.EventType != t.mask {
			continue
		}
		w.cfg.Metrics.events.WithLabelValues(t.name).Inc()
		switch t.kind {
		case "":
			return w.cfg.Ship(ctx, xidLine(now, g, d.EventData, d.GpuInstanceId))
		case kindRecovery:
			return w.cfg.Ship(ctx, recoveryLine(now, g, w.recoveryAction(d.Device)))
		case KindClock:
			// A GPU under load changes clocks several times a second (27 events in
			// 3 s of DGEMM on an H200): one line per interval says it happens.
			if last, ok := w.lastClock[g.pci()]; ok && now.Sub(last) < w.cfg.ClockInterval {
				w.cfg.Metrics.coalesced.WithLabelValues(t.name).Inc()
				return true
			}
			w.lastClock[g.pci()] = now
		}
		return w.cfg.Ship(ctx, eventLine(now, g, t.kind, t.level))
	}
	// Only watched types are registered; anything else is NVML's surprise.
	w.cfg.Metrics.errors.WithLabelValues("unexpected_event_type").Inc()
	w.cfg.Log.Warn("NVML delivered an event type that was not registered", "type", d.EventType)
	return true
}

// recoveryAction reads the action the driver asks for after a recovery-action
// event (the event itself carries none): NVML's field
// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; "unknown" when it cannot be read.
func (w *Watcher) recoveryAction(dev nvml.Device) string {
	if dev == nil {
		return nvmlfield.RecoveryUnknown
	}
	n, ret := nvmlfield.Uint(dev, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION)
	if ret != nvml.SUCCESS {
		w.cfg.Metrics.errors.WithLabelValues("DeviceGetFieldValues").Inc()
		return nvmlfield.RecoveryUnknown
	}
	a, _ := nvmlfield.RecoveryAction(n)
	return a
}

// byDevice names the GPU of an event, or an unknown one.
func (w *Watcher) byDevice(dev nvml.Device) GPU {
	for _, g := range w.gpus {
		if g.dev == dev {
			return g.id
		}
	}
	if dev != nil {
		return identify(dev)
	}
	return GPU{}
}

// findLost asks every GPU not yet known lost for its temperature, a read that
// reaches the GPU, and reports those that answer NVML_ERROR_GPU_IS_LOST; when none
// does, the loss is reported once for an unknown GPU. False when ctx ended.
func (w *Watcher) findLost(ctx context.Context) bool {
	found := false
	for _, g := range w.gpus {
		if g.lost {
			continue
		}
		if _, ret := g.dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.ERROR_GPU_IS_LOST {
			found = true
			if !w.reportLost(ctx, g) {
				return false
			}
		}
	}
	if !found && !w.anyLost() {
		return w.reportLost(ctx, &w.unknownLost)
	}
	return true
}

func (w *Watcher) anyLost() bool {
	for _, g := range w.gpus {
		if g.lost {
			return true
		}
	}
	return w.unknownLost.lost
}

// reportLost ships one line for a lost GPU, once.
func (w *Watcher) reportLost(ctx context.Context, g *gpu) bool {
	if g.lost {
		return true
	}
	g.lost = true
	w.cfg.Metrics.lost.Inc()
	w.cfg.Log.Error("NVML reports a GPU lost", "gpu", g.id.pci(), "uuid", g.id.uuid())
	return w.cfg.Ship(ctx, lostLine(w.cfg.Now(), g.id))
}

// pause waits LostRetry; false when ctx ended.
func (w *Watcher) pause(ctx context.Context) bool {
	t := time.NewTimer(w.cfg.LostRetry)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

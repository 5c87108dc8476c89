package nvmlevents

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/active-probes/nvmlfield"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
)

// The wording of the lines, one format per kind of event (the rule packs cite them
// as their sources, rules/packs/70-nvml-events.yaml). Keep them stable: rules,
// LogQL and dashboards match them.
const (
	// FormatXid: the Xid number, the GPU's PCI address and UUID.
	FormatXid = "NVML: Xid %d on GPU %s (%s)"
	// FormatInstance follows FormatXid when the Xid is attributed to a MIG GPU instance.
	FormatInstance = " GPU instance %d"
	// FormatEvent: what happened (one of the Kind texts), the PCI address and UUID.
	FormatEvent = "NVML: %s on GPU %s (%s)"
	// FormatLost: a GPU NVML reports lost (NVML_ERROR_GPU_IS_LOST).
	FormatLost = "NVML: GPU %s (%s) is lost: fallen off the bus or otherwise inaccessible"
	// FormatRecovery: the recovery action the driver asks for (nvmlfield's
	// Recovery names), the PCI address and UUID.
	FormatRecovery = "NVML: recovery action %s on GPU %s (%s)"
)

// Kinds of events other than Xids, as the lines name them.
const (
	KindDoubleBitECC = "double-bit ECC error"
	KindSingleBitECC = "single-bit ECC error"
	KindClock        = "clock change"
	KindPowerSource  = "power source change"
	// The types newer drivers added.
	KindSingleBitECCStorm     = "single-bit ECC error storm"
	KindDRAMRetirement        = "DRAM retirement"
	KindDRAMRetirementFailure = "DRAM retirement failure"
	KindPoison                = "non-fatal poison error"
	KindFatalPoison           = "fatal poison error"
	KindGPUUnavailable        = "GPU unavailable error"
)

// Syslog levels of the lines (the shipped records' severity).
const (
	levelErr     = 3
	levelWarning = 4
	levelNotice  = 5
)

// noInstance is NVML's gpuInstanceId/computeInstanceId of an event not attributed
// to a MIG instance.
const noInstance = 0xFFFFFFFF

// Unknown stands for a PCI address or UUID NVML did not give.
const Unknown = "unknown"

// GPU names a device in the lines.
type GPU struct {
	PCI  string // 0000:3b:00.0
	UUID string // GPU-...
}

func (g GPU) pci() string {
	if g.PCI == "" {
		return Unknown
	}
	return g.PCI
}

func (g GPU) uuid() string {
	if g.UUID == "" {
		return Unknown
	}
	return g.UUID
}

// Line is one event as it is shipped.
type Line struct {
	Time  time.Time
	Text  string
	Level int // syslog level: err for Xids, double-bit ECC and lost GPUs
}

func xidLine(t time.Time, g GPU, xid uint64, gi uint32) Line {
	text := fmt.Sprintf(FormatXid, xid, g.pci(), g.uuid())
	if gi != noInstance {
		text += fmt.Sprintf(FormatInstance, gi)
	}
	return Line{Time: t, Text: text, Level: levelErr}
}

func eventLine(t time.Time, g GPU, kind string, level int) Line {
	return Line{Time: t, Text: fmt.Sprintf(FormatEvent, kind, g.pci(), g.uuid()), Level: level}
}

func recoveryLine(t time.Time, g GPU, action string) Line {
	level := levelErr
	if action == nvmlfield.RecoveryNone {
		level = levelNotice
	}
	return Line{Time: t, Text: fmt.Sprintf(FormatRecovery, action, g.pci(), g.uuid()), Level: level}
}

func lostLine(t time.Time, g GPU) Line {
	return Line{Time: t, Text: fmt.Sprintf(FormatLost, g.pci(), g.uuid()), Level: levelErr}
}

// Record is the line as the agent ships it: source nvml, the node's name, the level
// as its severity — the labels every exporter line of the node has.
func (l Line) Record(node string) ship.Record {
	return ship.Record{Time: l.Time, Body: l.Text, Source: ship.SourceNVML, Node: node, Level: l.Level}
}

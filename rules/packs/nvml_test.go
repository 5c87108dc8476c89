package packs_test

import (
	"fmt"
	"testing"

	"github.com/faultline-dev/faultline/active-probes/nvmlevents"
	"github.com/faultline-dev/faultline/active-probes/nvmlfield"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/packengine"
)

// fired returns the rules of pack that line fires.
func fired(e *rules.Engine, pack string, l *logstream.Line) []*rules.Compiled {
	var out []*rules.Compiled
	for _, h := range e.Match(l, nil) {
		if h.Rule.Pack == pack && !h.Companion {
			out = append(out, h.Rule)
		}
	}
	return out
}

// TestNVMLXidJoinsKernelXid: for every Xid code, the NVML line fires exactly one
// nvml-events rule, and its fault is the nvidia-xid rule that the kernel's line of
// the same code fires, with the same action and severity: an Xid seen only by NVML
// is handled as the kernel's line would be, and one seen by both is one fault.
func TestNVMLXidJoinsKernelXid(t *testing.T) {
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	codes := []int{999}
	for x := 1; x <= 200; x++ {
		codes = append(codes, x)
	}
	for _, x := range codes {
		kl := &logstream.Line{Source: logstream.SourceKernel,
			Text: fmt.Sprintf("NVRM: Xid (PCI:0000:3b:00): %d, pid='<unknown>', name=<unknown>, an error", x)}
		nl := &logstream.Line{Source: logstream.SourceNVML,
			Text: fmt.Sprintf(nvmlevents.FormatXid, x, "0000:3b:00.0", "GPU-5c1a9d3e-7f2b-4c1d-9a8e-0b6f3e2d1c4a")}
		wantJoined(t, e, fmt.Sprintf("Xid %d", x), kl, nl)
		// A kernel line never fires an NVML rule, nor an NVML line a kernel rule.
		if extra := fired(e, "nvml-events", kl); len(extra) != 0 {
			t.Errorf("Xid %d: the kernel line fires %v", x, extra)
		}
		if extra := fired(e, "nvidia-xid", nl); len(extra) != 0 {
			t.Errorf("Xid %d: the NVML line fires %v", x, extra)
		}
	}
}

// TestNVMLPackCitesTheWatcherFormats: the formats the pack's rules cite are the
// watcher's own, so a change of wording fails here instead of in production.
func TestNVMLPackCitesTheWatcherFormats(t *testing.T) {
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{nvmlevents.FormatXid: true, nvmlevents.FormatEvent: true, nvmlevents.FormatLost: true, nvmlevents.FormatRecovery: true}
	seen := map[string]bool{}
	for _, r := range e.Set().Rules {
		if r.Pack != "nvml-events" {
			continue
		}
		if r.Source != rules.SourceNVML {
			t.Errorf("%s reads %q, want nvml", r, r.Source)
		}
		for _, s := range r.Sources {
			if !want[s.Format] {
				t.Errorf("%s cites %q, not a format of active-probes/nvmlevents", r, s.Format)
			}
			seen[s.Format] = true
		}
	}
	for f := range want {
		if !seen[f] {
			t.Errorf("no rule cites %q", f)
		}
	}
	for _, kind := range []string{nvmlevents.KindDoubleBitECC, nvmlevents.KindSingleBitECC, nvmlevents.KindClock, nvmlevents.KindPowerSource,
		nvmlevents.KindSingleBitECCStorm, nvmlevents.KindDRAMRetirement, nvmlevents.KindDRAMRetirementFailure, nvmlevents.KindPoison,
		nvmlevents.KindFatalPoison, nvmlevents.KindGPUUnavailable} {
		l := &logstream.Line{Source: logstream.SourceNVML, Text: fmt.Sprintf(nvmlevents.FormatEvent, kind, "0000:3b:00.0", "GPU-1")}
		if n := fired(e, "nvml-events", l); len(n) != 1 {
			t.Errorf("%q fires %v, want one rule", l.Text, n)
		}
	}
}

// TestNVMLRecoveryActionJoinsXid154: each recovery action NVML names fires one
// nvml-events rule, and its fault is the nvidia-xid rule that the kernel's Xid 154
// line asking for the same action fires, with the same action and severity.
func TestNVMLRecoveryActionJoinsXid154(t *testing.T) {
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	for action, kernel := range map[string]string{
		nvmlfield.RecoveryGPUReset:      "0x1 (GPU Reset Required)",
		nvmlfield.RecoveryNodeReboot:    "0x2 (Node Reboot Required)",
		nvmlfield.RecoveryDrainP2P:      "0x3 (Drain P2P)",
		nvmlfield.RecoveryDrainAndReset: "0x4 (Drain and Reset)",
		nvmlfield.RecoveryNone:          "0x0 (None)",
		nvmlfield.RecoveryUnknown:       "0x9 (Something New)",
	} {
		kl := &logstream.Line{Source: logstream.SourceKernel,
			Text: "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to " + kernel}
		nl := &logstream.Line{Source: logstream.SourceNVML,
			Text: fmt.Sprintf(nvmlevents.FormatRecovery, action, "0000:3b:00.0", "GPU-5c1a9d3e-7f2b-4c1d-9a8e-0b6f3e2d1c4a")}
		wantJoined(t, e, action, kl, nl)
	}
}

// wantJoined: the kernel line fires one nvidia-xid rule and the NVML line one
// nvml-events rule whose fault is that rule, with its action and severity.
func wantJoined(t *testing.T, e *rules.Engine, what string, kl, nl *logstream.Line) {
	t.Helper()
	k, n := fired(e, "nvidia-xid", kl), fired(e, "nvml-events", nl)
	if len(k) != 1 || len(n) != 1 {
		t.Errorf("%s: kernel line fires %v, NVML line fires %v; want one rule each", what, k, n)
		return
	}
	if n[0].FaultRule() != k[0] || n[0].Action != k[0].Action || n[0].Severity != k[0].Severity {
		t.Errorf("%s: NVML's %s (%s/%s, fault %s), the kernel's %s (%s/%s)", what, n[0], n[0].Action, n[0].Severity,
			n[0].FaultRule(), k[0], k[0].Action, k[0].Severity)
	}
}

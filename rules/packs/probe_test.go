//go:build cgo

package packs_test

import (
	"context"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/faultline-dev/faultline/active-probes/checks"
	"github.com/faultline-dev/faultline/active-probes/checks/nvmlmock"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/active-probes/probelines"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/test/packengine"
)

// TestProbeVerdictRulesReadTheNVMLCheck: the nvml check's own results on go-nvml's
// DGX A100 mock, each with one fault injected, written as the agent writes its
// verdict lines, fire the probe-verdicts rule of that fault when the run was
// scheduled, and none when it was run by hand or to confirm a rule; a healthy
// machine fires none. The pack's regexes are held to the check's values and
// wordings here, not to lines copied by hand.
func TestProbeVerdictRulesReadTheNVMLCheck(t *testing.T) {
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := probe.Default().Get(probe.NVMLCheck)
	if !ok {
		t.Fatal("no nvml check")
	}
	gpu := func(srv *dgxa100.Server, i int) *dgxa100.Device { return srv.Devices[i].(*dgxa100.Device) }
	for _, tc := range []struct {
		name   string
		inject func(*dgxa100.Server)
		want   string // the rule fired, "" none
	}{
		{"healthy", func(*dgxa100.Server) {}, ""},
		{"a GPU missing", func(s *dgxa100.Server) {
			s.DeviceGetCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
		}, "probe-gpus-missing"},
		{"driver not loaded", func(s *dgxa100.Server) {
			s.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
		}, "probe-gpus-missing"},
		{"remap failed", func(s *dgxa100.Server) {
			gpu(s, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 2, false, true, nvml.SUCCESS }
		}, "probe-row-remap"},
		{"remap pending", func(s *dgxa100.Server) {
			gpu(s, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 1, true, false, nvml.SUCCESS }
		}, "probe-row-remap"},
		{"uncorrectable ECC", func(s *dgxa100.Server) {
			gpu(s, 5).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return 3, nvml.SUCCESS }
		}, "probe-ecc-uncorrectable"},
		{"NVLink down", func(s *dgxa100.Server) {
			gpu(s, 2).GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
				if link >= 12 {
					return 0, nvml.ERROR_INVALID_ARGUMENT
				}
				if link == 7 {
					return nvml.FEATURE_DISABLED, nvml.SUCCESS
				}
				return nvml.FEATURE_ENABLED, nvml.SUCCESS
			}
		}, "probe-nvlink-down"},
		{"PCIe link x8", func(s *dgxa100.Server) {
			gpu(s, 1).GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 8, nvml.SUCCESS }
		}, "probe-pcie-width"},
	} {
		srv := nvmlmock.HealthyDGXA100()
		tc.inject(srv)
		params, err := spec.Params.Resolve(probe.Params{"expected_gpus": "8"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := (&checks.NVML{Lib: srv}).Run(context.Background(), params)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		res.Check = probe.NVMLCheck
		for _, trigger := range []string{"schedule", "manual", "rule", "recovery"} {
			line := &logstream.Line{Source: logstream.SourceProbe, Text: probelines.Format(res, trigger)}
			var got []string
			for _, r := range fired(e, "probe-verdicts", line) {
				got = append(got, r.ID)
			}
			want := []string{}
			if tc.want != "" && trigger == "schedule" {
				want = []string{tc.want}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, %s: %q fires %v, want %v", tc.name, trigger, line.Text, got, want)
			}
		}
		// The same text from any other source fires nothing of the pack.
		if got := fired(e, "probe-verdicts", &logstream.Line{Source: logstream.SourcePod, Text: probelines.Format(res, "schedule")}); len(got) != 0 {
			t.Errorf("%s: a pod line fires %v", tc.name, got)
		}
	}
}

// TestProbeVerdictPackCitesTheLayout: the format the pack's rules cite is the one the
// agent writes its lines with.
func TestProbeVerdictPackCitesTheLayout(t *testing.T) {
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range e.Set().Rules {
		if r.Pack != "probe-verdicts" {
			continue
		}
		for _, s := range r.Sources {
			n++
			if s.Format != probelines.Layout || s.File != "active-probes/probelines/line.go" {
				t.Errorf("%s cites %s %q, want probelines.Layout", r, s.File, s.Format)
			}
		}
	}
	if n == 0 {
		t.Error("the probe-verdicts pack cites no source")
	}
}

//go:build cgo

package checks

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/faultline-dev/faultline/active-probes/checks/nvmlmock"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/promtest"
)

// dgxPCI are the PCI addresses of a DGX A100's eight GPUs, as NVML prints them.
var dgxPCI = []string{"00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
	"00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0"}

// healthyDGX is nvmlmock's healthy DGX A100 (see there).
func healthyDGX() *dgxa100.Server { return nvmlmock.HealthyDGXA100() }

func dev(srv *dgxa100.Server, i int) *dgxa100.Device { return srv.Devices[i].(*dgxa100.Device) }

func runNVML(t *testing.T, srv *dgxa100.Server, p probe.Params) probe.Result {
	t.Helper()
	res, _ := runOne(t, mustSpec(t, "nvml"), &NVML{Lib: srv}, p)
	return res
}

func TestNVMLHealthyDGXA100(t *testing.T) {
	res := runNVML(t, healthyDGX(), probe.Params{"expected_gpus": "8", "expected_nvlinks": "12"})
	wantStatus(t, "healthy", res.Status, probe.StatusPass)
	if len(res.Devices) != 8 || res.Values["gpu_count"] != 8 {
		t.Fatalf("devices %d, values %v", len(res.Devices), res.Values)
	}
	d := res.Devices[3]
	if d.ID != "3" || d.PCI != "0000:4e:00.0" || d.Name != "NVIDIA A100-SXM4-80GB" || !strings.HasPrefix(d.UUID, "GPU-") {
		t.Errorf("identity: %+v", d)
	}
	if d.Values["nvlink_up"] != 12 || d.Values["pcie_link_width"] != 16 || d.Values["pcie_link_max_gbps"] < 31 {
		t.Errorf("values: %v", d.Values)
	}
	if _, ok := d.Values["retired_pages_pending"]; ok {
		t.Error("an unsupported check left a value")
	}
	if !strings.Contains(res.Message, "driver 550.54.15") {
		t.Errorf("message %q", res.Message)
	}
}

func TestNVMLFaults(t *testing.T) {
	cases := []struct {
		name   string
		inject func(*dgxa100.Server)
		params probe.Params
		want   probe.Status // for the check
		gpu    string       // the device that must carry the fault ("" none)
		gpuSt  probe.Status
		text   string // in the message
	}{
		{"remapped rows pending", func(s *dgxa100.Server) {
			dev(s, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 2, true, false, nvml.SUCCESS }
		}, nil, probe.StatusFail, "3", probe.StatusFail, "row remapping pending"},
		{"remapping failed", func(s *dgxa100.Server) {
			dev(s, 1).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 512, false, true, nvml.SUCCESS }
		}, nil, probe.StatusFail, "1", probe.StatusFail, "row remapping failed (512 uncorrectable rows)"},
		{"HW slowdown", func(s *dgxa100.Server) {
			dev(s, 3).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksThrottleReasonHwSlowdown, nvml.SUCCESS }
		}, nil, probe.StatusFail, "3", probe.StatusFail, "HW slowdown"},
		{"HW slowdown as warn", func(s *dgxa100.Server) {
			dev(s, 3).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksThrottleReasonHwSlowdown, nvml.SUCCESS }
		}, probe.Params{"throttle_action": "warn"}, probe.StatusWarn, "3", probe.StatusWarn, "HW slowdown"},
		{"HW thermal", func(s *dgxa100.Server) {
			dev(s, 2).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
				return nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown, nvml.SUCCESS
			}
		}, nil, probe.StatusFail, "2", probe.StatusFail, "overheating"},
		{"power brake is a warn", func(s *dgxa100.Server) {
			dev(s, 4).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
				return nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, nvml.SUCCESS
			}
		}, nil, probe.StatusWarn, "4", probe.StatusWarn, "power brake"},
		{"x8 link on a x16 GPU", func(s *dgxa100.Server) {
			dev(s, 5).GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 8, nvml.SUCCESS }
		}, nil, probe.StatusFail, "5", probe.StatusFail, "PCIe link x8, expected x16"},
		{"gen3 on a busy gen4 GPU", func(s *dgxa100.Server) {
			dev(s, 6).GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 3, nvml.SUCCESS }
		}, nil, probe.StatusWarn, "6", probe.StatusWarn, "PCIe link gen3, expected gen4"},
		{"gen1 while idle is power saving", func(s *dgxa100.Server) {
			dev(s, 6).GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 1, nvml.SUCCESS }
			dev(s, 6).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksEventReasonGpuIdle, nvml.SUCCESS }
		}, nil, probe.StatusPass, "6", probe.StatusPass, ""},
		{"NVLink down", func(s *dgxa100.Server) {
			prev := dev(s, 7).GetNvLinkStateFunc
			dev(s, 7).GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
				if l == 5 {
					return nvml.FEATURE_DISABLED, nvml.SUCCESS
				}
				return prev(l)
			}
		}, nil, probe.StatusFail, "7", probe.StatusFail, "NVLink 5 down (11 up)"},
		{"recovery action: GPU reset", func(s *dgxa100.Server) {
			dev(s, 1).GetFieldValuesFunc = recoveryField(uint32(nvml.GPU_RECOVERY_ACTION_GPU_RESET))
		}, nil, probe.StatusFail, "1", probe.StatusFail, "the driver asks for recovery: GPU reset"},
		{"recovery action: node reboot", func(s *dgxa100.Server) {
			dev(s, 1).GetFieldValuesFunc = recoveryField(uint32(nvml.GPU_RECOVERY_ACTION_NODE_REBOOT))
		}, probe.Params{"part": "recovery"}, probe.StatusFail, "1", probe.StatusFail, "the driver asks for recovery: node reboot"},
		{"recovery action a later driver added", func(s *dgxa100.Server) {
			dev(s, 1).GetFieldValuesFunc = recoveryField(9)
		}, nil, probe.StatusWarn, "1", probe.StatusWarn, "the driver asks for recovery action 9, which this agent does not know"},
		{"recovery action none", func(s *dgxa100.Server) {
			dev(s, 1).GetFieldValuesFunc = recoveryField(uint32(nvml.GPU_RECOVERY_ACTION_NONE))
		}, nil, probe.StatusPass, "1", probe.StatusPass, ""},
		{"no NVLink where 12 are expected", func(s *dgxa100.Server) {
			// What NVML answered for every link of a real H200 that had none exposed.
			dev(s, 2).GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}, probe.Params{"expected_nvlinks": "12"}, probe.StatusFail, "2", probe.StatusFail, "0 of 12 NVLinks up: NVML reports no NVLink on this GPU"},
		{"no NVLink, none expected", func(s *dgxa100.Server) {
			dev(s, 2).GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}, nil, probe.StatusPass, "2", probe.StatusPass, ""},
		{"missing GPU", func(s *dgxa100.Server) {
			s.DeviceGetCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
		}, probe.Params{"expected_gpus": "8"}, probe.StatusFail, "", "", "found 7 GPUs, expected 8"},
		{"volatile ECC", func(s *dgxa100.Server) {
			dev(s, 0).GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
				if t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.VOLATILE_ECC {
					return 3, nvml.SUCCESS
				}
				return 0, nvml.SUCCESS
			}
		}, nil, probe.StatusFail, "0", probe.StatusFail, "3 uncorrectable ECC errors"},
		{"ECC counter through GetMemoryErrorCounter", func(s *dgxa100.Server) {
			dev(s, 0).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			dev(s, 0).GetMemoryErrorCounterFunc = func(nvml.MemoryErrorType, nvml.EccCounterType, nvml.MemoryLocation) (uint64, nvml.Return) {
				return 1, nvml.SUCCESS
			}
		}, nil, probe.StatusFail, "0", probe.StatusFail, "1 uncorrectable ECC errors"},
		{"retired pages pending", func(s *dgxa100.Server) {
			dev(s, 2).GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
		}, nil, probe.StatusFail, "2", probe.StatusFail, "retired pages pending"},
		{"GPU lost", func(s *dgxa100.Server) {
			dev(s, 1).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_GPU_IS_LOST }
		}, nil, probe.StatusFail, "1", probe.StatusFail, "GPU is lost"},
		{"unstubbed mock function", func(s *dgxa100.Server) {
			dev(s, 4).GetNvLinkStateFunc = nil // the mock panics: the check reports an error, the probe survives
		}, nil, probe.StatusError, "4", probe.StatusError, "NVML call panicked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := healthyDGX()
			c.inject(srv)
			res := runNVML(t, srv, c.params)
			wantStatus(t, c.name, res.Status, c.want)
			if c.text != "" && !strings.Contains(res.Message, c.text) {
				t.Errorf("message %q does not say %q", res.Message, c.text)
			}
			for _, d := range res.Devices {
				want := probe.StatusPass
				if d.ID == c.gpu {
					want = c.gpuSt
				}
				if d.Status != want {
					t.Errorf("GPU %s: %s (%s), want %s", d.ID, d.Status, d.Message, want)
				}
			}
		})
	}
}

// The part parameter reads one part of each GPU's health alone: a pending row remap
// fails the remap part and all, and is not seen by the clocks part, which sees the
// power brake that the remap part does not.
func TestNVMLPart(t *testing.T) {
	srv := healthyDGX()
	dev(srv, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 2, true, false, nvml.SUCCESS }
	dev(srv, 4).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		return nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, nvml.SUCCESS
	}
	for _, c := range []struct {
		part string
		want probe.Status
		has  string
		not  string
	}{
		{"all", probe.StatusFail, "row remapping pending", ""},
		{"remap", probe.StatusFail, "row remapping pending", "power brake"},
		{"clocks", probe.StatusWarn, "power brake", "row remapping"},
		{"pcie", probe.StatusPass, "", "power brake"},
	} {
		res := runNVML(t, srv, probe.Params{"part": c.part})
		wantStatus(t, "part "+c.part, res.Status, c.want)
		if c.has != "" && !strings.Contains(res.Message, c.has) {
			t.Errorf("part %s: message %q does not say %q", c.part, res.Message, c.has)
		}
		if c.not != "" && strings.Contains(res.Message, c.not) {
			t.Errorf("part %s: message %q says %q", c.part, res.Message, c.not)
		}
	}
	if d := runNVML(t, srv, probe.Params{"part": "remap"}).Devices[3]; d.Values["nvlink_up"] != 0 || d.Values["remap_pending"] != 1 {
		t.Errorf("part remap read more or less than row remapping: %v", d.Values)
	}
}

func TestNVMLLibraryNotFound(t *testing.T) {
	lib := nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1"))
	res, prom := runOne(t, mustSpec(t, "nvml"), &NVML{Lib: lib}, nil)
	wantStatus(t, "no NVML", res.Status, probe.StatusSkipped)
	if !strings.Contains(res.Message, probe.NVMLLibraryNotFound) {
		t.Errorf("message %q", res.Message)
	}
	promtest.Want(t, prom, "faultline_probe_success", map[string]string{"check": "nvml"}, 0)

	// A node that should have GPUs but has no NVML cannot be vouched for.
	res, _ = runOne(t, mustSpec(t, "nvml"), &NVML{Lib: lib}, probe.Params{"expected_gpus": "8"})
	wantStatus(t, "no NVML, 8 expected", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, probe.NVMLLibraryNotFound) {
		t.Errorf("message %q", res.Message)
	}

	// The registered probe with the default library: on this machine there is no GPU
	// driver, and whatever the machine, it must not panic.
	r := probe.NewRunner(nil, probe.Config{Node: "n"}, nil)
	res, err := r.Run(context.Background(), "nvml", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("default library: %s: %s", res.Status, res.Message)
	if res.Status == probe.StatusSkipped && !strings.Contains(res.Message, probe.NVMLLibraryNotFound) {
		t.Errorf("message %q", res.Message)
	}
}

func TestNVMLMetrics(t *testing.T) {
	srv := healthyDGX()
	dev(srv, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 2, true, false, nvml.SUCCESS }
	dev(srv, 5).GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 8, nvml.SUCCESS }
	_, prom := runOne(t, mustSpec(t, "nvml"), &NVML{Lib: srv}, probe.Params{"pcie_width_action": "warn"})
	l := func(dev string) map[string]string {
		return map[string]string{"node": "gpu-node-07", "check": "nvml", "device": dev}
	}
	promtest.Want(t, prom, "faultline_probe_result", l(""), 0)
	promtest.Want(t, prom, "faultline_probe_result", l("0"), 1)
	promtest.Want(t, prom, "faultline_probe_result", l("3"), 0)
	promtest.Want(t, prom, "faultline_probe_result", l("5"), 0.5)
	v := l("3")
	v["metric"] = "remapped_rows_uncorrectable"
	promtest.Want(t, prom, "faultline_probe_value", v, 2)
	v = l("5")
	v["metric"] = "pcie_link_width"
	promtest.Want(t, prom, "faultline_probe_value", v, 8)
	v = l("")
	v["metric"] = "gpu_count"
	promtest.Want(t, prom, "faultline_probe_value", v, 8)
	promtest.Want(t, prom, "faultline_probe_success", map[string]string{"check": "nvml"}, 1)
}

// TestNVMLRecordedH200: NVML answering what the driver answered on a real H200
// (580.159.04; active-probes/checks/testdata/recorded/h200: PCIe gen5 x16 of gen5
// x16, every NVLink NOT_SUPPORTED, no remapped rows, no ECC errors, no clock event
// reason) gives exactly the result the agent's check gave there.
// recoveryField answers NVML_FI_DEV_GET_GPU_RECOVERY_ACTION as the H200's driver
// did: an unsigned int.
func recoveryField(action uint32) func([]nvml.FieldValue) nvml.Return {
	return func(values []nvml.FieldValue) nvml.Return {
		for i := range values {
			values[i].NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
			if values[i].FieldId == nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
				values[i].NvmlReturn, values[i].ValueType = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				binary.NativeEndian.PutUint32(values[i].Value[:4], action)
			}
		}
		return nvml.SUCCESS
	}
}

func TestNVMLRecordedH200(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "recorded", "h200", "agent-check-sweep.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded probe.Result
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&recorded); err != nil || recorded.Check != "nvml" || len(recorded.Devices) != 1 {
		t.Fatalf("%v: %+v", err, recorded)
	}
	srv := healthyDGX()
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 1, nvml.SUCCESS }
	srv.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "580.159.04", nvml.SUCCESS }
	d := dev(srv, 0)
	d.Name, d.UUID = "NVIDIA H200", recorded.Devices[0].UUID
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		copy(p.BusId[:], "00000000:00:06.0")
		p.PciDeviceId = 0x233510DE
		return p, nvml.SUCCESS
	}
	d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
	d.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
	d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	// The recovery action field, read through nvidia-ml-py on the second H200
	// (nvml-event-types.json): SUCCESS, an unsigned int, 0. The recorded result
	// predates the check's reading it, so its value is expected beside the others.
	d.GetFieldValuesFunc = recoveryField(uint32(nvml.GPU_RECOVERY_ACTION_NONE))
	res := runNVML(t, srv, nil)
	got, want := res.Devices[0], recorded.Devices[0]
	want.Values = maps.Clone(want.Values)
	want.Values["recovery_action"] = 0
	if res.Status != recorded.Status || res.Message != recorded.Message || got.ID != want.ID || got.PCI != want.PCI ||
		got.Name != want.Name || got.UUID != want.UUID || got.Status != want.Status || !maps.Equal(got.Values, want.Values) ||
		!maps.Equal(res.Values, recorded.Values) {
		t.Errorf("mock H200\n%+v\n%+v\nrecorded\n%+v\n%+v", res, got, recorded, want)
	}
}

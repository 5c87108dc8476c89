package checks

import (
	"os"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/promtest"
)

func TestParseDCGMDiagShapes(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/recorded/dcgmi/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// DCGM 3.1: upper-case PASS, gpu_ids as "0,1,...,7" and as numbers, nulls between tests.
	d, err := ParseDCGMDiag(read("v3-level1-pass.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "3.1.0" || len(d.Tests) != 10 || d.Tests[0].Name != "Denylist" || len(d.Tests[0].Results[0].Entities) != 8 ||
		d.Tests[9].Results[7].Entities[0] != "7" || d.Tests[9].Results[7].Status != probe.StatusPass {
		t.Errorf("3.x: %+v", d)
	}
	// DCGM 4.2.3 as captured on a GB10: entity results, warnings with severities, metadata.
	d, err = ParseDCGMDiag(read("gb10-level1-persistence.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := d.Tests[0].Results[0]
	if d.Version != "4.2.3" || d.Driver != "580.82.09" || d.Tests[0].Summary != "Fail" || r.Entities[0] != "0" ||
		r.Status != probe.StatusFail || r.Warnings[0].ErrorID != 29 || r.Warnings[0].Severity != 5 ||
		!strings.HasPrefix(r.Warnings[0].Message, "Persistence Mode: Persistence mode for GPU 0 is disabled") {
		t.Errorf("4.x: %+v", d)
	}
	// Text before the document, gpu_id (singular) and "Skip", string warnings, other entity groups.
	d, err = ParseDCGMDiag([]byte(`WARNING: dcgmi printed this first
{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
  {"name": "GPU Memory", "results": [{"gpu_id": "0", "status": "Skip"}, {"gpu_id": "1", "status": "Fail", "warnings": ["GPU 1 Error using CUDA API cuCtxCreate"], "info": "GPU 1 Allocated 15568304202 bytes (98.3%)"}]},
  {"name": "cpu eud", "results": [{"entity_group": "CPU", "entity_group_id": 7, "entity_id": 0, "status": "Pass"}]}]}], "version": "3.3.1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Tests[0].Results[0].Status != probe.StatusSkipped || d.Tests[0].Results[1].Warnings[0].Message != "GPU 1 Error using CUDA API cuCtxCreate" ||
		d.Tests[0].Results[1].Info[0] == "" || d.Tests[1].Results[0].Entities[0] != "cpu0" {
		t.Errorf("variants: %+v", d)
	}
	for _, bad := range []string{"", "Error: unable to establish a connection to the specified host: localhost", `{"something": "else"}`, `{"DCGM Diagnostic": `} {
		if _, err := ParseDCGMDiag([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestDCGMLevel1Pass(t *testing.T) {
	for _, rec := range []string{"v4-level1-pass.json", "v3-level1-pass.json"} {
		path, args := fake(t, "dcgmi", "dcgmi/"+rec)
		res, prom := runOne(t, mustSpec(t, "dcgm"), &DCGM{Path: path}, nil)
		wantStatus(t, rec, res.Status, probe.StatusPass)
		if len(res.Devices) != 8 {
			t.Errorf("%s: %d devices", rec, len(res.Devices))
		}
		if got := fakeArgs(t, args); got[0] != `["dcgmi","diag","-r","1","-j"]` {
			t.Errorf("argv %v", got)
		}
		promtest.Want(t, prom, "faultline_probe_result", map[string]string{"node": "gpu-node-07", "check": "dcgm", "device": "7"}, 1)
	}
}

func TestDCGMLevel2MemoryFailure(t *testing.T) {
	// dcgmi exits 226 when a test fails; the JSON still says which.
	path, args := fake(t, "dcgmi", "dcgmi/v4-level2-memory-fail.json")
	res, prom := runOne(t, mustSpec(t, "dcgm"), &DCGM{Path: path}, probe.Params{"level": "2", "gpus": "0,1,2,3,4,5,6,7", "host": "127.0.0.1:5555"})
	wantStatus(t, "memory", res.Status, probe.StatusFail)
	d := deviceStatus(t, res, "3", probe.StatusFail)
	if !strings.Contains(d.Message, "memory: Fail: A memory mismatch was detected on GPU 3") || !strings.Contains(d.Message, "[DCGM error 58]") {
		t.Errorf("GPU 3: %q", d.Message)
	}
	if d.Values["tests_fail"] != 1 || d.Values["tests_pass"] != 3 {
		t.Errorf("GPU 3 counts: %v", d.Values)
	}
	if len(d.Failed) != 1 || d.Failed[0] != "memory" {
		t.Errorf("GPU 3 failed tests %q, want [memory]", d.Failed)
	}
	for _, id := range []string{"0", "1", "2", "4", "5", "6", "7"} {
		deviceStatus(t, res, id, probe.StatusPass)
	}
	if !strings.Contains(res.Message, "DCGM 4.2.3, driver 570.124.06") {
		t.Errorf("message %q", res.Message)
	}
	if got := fakeArgs(t, args); got[0] != `["dcgmi","diag","-r","2","-j","-i","0,1,2,3,4,5,6,7","--host","127.0.0.1:5555"]` {
		t.Errorf("argv %v", got)
	}
	promtest.Want(t, prom, "faultline_probe_result", map[string]string{"node": "gpu-node-07", "check": "dcgm", "device": "3"}, 0)
	promtest.Want(t, prom, "faultline_probe_success", map[string]string{"check": "dcgm"}, 1)

	// DCGM 3.3 shape: a pending row remap on GPU 5 in the level-1 deployment checks.
	path, _ = fake(t, "dcgmi", "dcgmi/v3-level1-rowremap-fail.json")
	res, _ = runOne(t, mustSpec(t, "dcgm"), &DCGM{Path: path}, nil)
	wantStatus(t, "row remap", res.Status, probe.StatusFail)
	if d := deviceStatus(t, res, "5", probe.StatusFail); !strings.Contains(d.Message, "Page Retirement/Row Remap: Fail: GPU 5 had memory errors and row remappings are pending") {
		t.Errorf("GPU 5: %q", d.Message)
	} else if len(d.Failed) != 1 || d.Failed[0] != "Page Retirement/Row Remap" {
		t.Errorf("GPU 5 failed tests %q", d.Failed)
	}
	if d := deviceStatus(t, res, "4", probe.StatusPass); len(d.Failed) != 0 {
		t.Errorf("GPU 4 passed with failed tests %q", d.Failed)
	}
	// The operator decided to live with pending remaps (error 85) until the next reboot.
	res, _ = runOne(t, mustSpec(t, "dcgm"), &DCGM{Path: path}, probe.Params{"ignore_errors": "85"})
	wantStatus(t, "ignored", res.Status, probe.StatusPass)
}

func TestDCGMConfigurationIsAWarn(t *testing.T) {
	// The GB10 capture: "software" fails only because persistence mode is off, with DCGM's
	// config severity: a setup problem, not a GPU fault.
	path, _ := fake(t, "dcgmi", "dcgmi/gb10-level1-persistence.json")
	res, _ := runOne(t, mustSpec(t, "dcgm"), &DCGM{Path: path}, nil)
	wantStatus(t, "persistence mode", res.Status, probe.StatusWarn)
	if d := deviceStatus(t, res, "0", probe.StatusWarn); !strings.Contains(d.Message, "software: Fail (configuration): Persistence Mode") {
		t.Errorf("GPU 0: %q", d.Message)
	}
}

func TestDCGMCannotRun(t *testing.T) {
	path, _ := fake(t, "dcgmi", "dcgmi/no-hostengine.json")
	res, prom := runOne(t, mustSpec(t, "dcgm"), &DCGM{Path: path}, nil)
	wantStatus(t, "no hostengine", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "exit 250") || !strings.Contains(res.Message, "Unable to connect to host engine") {
		t.Errorf("message %q", res.Message)
	}
	promtest.Want(t, prom, "faultline_probe_success", map[string]string{"check": "dcgm"}, 0)

	res, _ = runOne(t, mustSpec(t, "dcgm"), &DCGM{Path: "/nonexistent/dcgmi"}, nil)
	wantStatus(t, "no dcgmi", res.Status, probe.StatusError)
	if !strings.Contains(res.Message, "program not found") {
		t.Errorf("message %q", res.Message)
	}
}

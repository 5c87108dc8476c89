package autopilot

import (
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// Every alias names a registered check with parameters its schema accepts.
func TestAliasesResolve(t *testing.T) {
	for name, a := range Aliases() {
		spec, ok := probe.Default().Get(a.Check)
		if !ok {
			t.Errorf("%s: unknown check %s", name, a.Check)
			continue
		}
		p := a.Params.Clone()
		if spec.Peer {
			p = probe.Params{"peer": "10.0.0.2"} // the controller picks one
		}
		if _, err := spec.Params.Resolve(p); err != nil {
			t.Errorf("%s → %s: %v", name, a.Check, err)
		}
		if _, clash := probe.Default().Get(name); clash {
			t.Errorf("alias %s hides faultline's check of that name", name)
		}
	}
	checks, params := DeepChecks()
	for _, c := range checks {
		spec, ok := probe.Default().Get(c)
		if !ok {
			t.Fatalf("deep check %s unknown", c)
		}
		p, err := spec.Params.Resolve(params[c])
		if err != nil || !spec.IsInvasive(p) {
			t.Errorf("deep check %s: %v, invasive %v", c, err, spec.IsInvasive(p))
		}
	}
}

func TestGPUHealth(t *testing.T) {
	for _, c := range []struct {
		worst       string
		deep, evict bool
		want        string
	}{
		{"", false, false, ""},
		{"PASS", false, false, "PASS"},
		{"WARN", false, false, "WARN"},
		{"FAIL", false, false, "WARN"},
		{"PASS", true, false, "TESTING"},
		{"", true, false, "TESTING"},
		{"PASS", true, true, "EVICT"},
		{"", false, true, "EVICT"},
	} {
		if got := GPUHealth(c.worst, c.deep, c.evict); got != c.want {
			t.Errorf("GPUHealth(%q, deep %v, evict %v) = %q, want %q", c.worst, c.deep, c.evict, got, c.want)
		}
	}
}

func TestDCGMLevel3(t *testing.T) {
	at := time.Date(2024, 10, 10, 21, 12, 3, 0, time.FixedZone("CEST", 2*3600))
	label, out, ok := DCGMLevel3(probe.Result{Status: probe.StatusPass}, at)
	if !ok || label != "PASS_2024-10-10_19.12.03UTC" || out != "" {
		t.Errorf("pass: %q %q %v", label, out, ok)
	}
	fail := probe.Result{Status: probe.StatusFail, Devices: []probe.DeviceResult{
		{ID: "0", Status: probe.StatusFail, Failed: []string{"Memory Bandwidth", "Page Retirement/Row Remap"}},
		{ID: "1", Status: probe.StatusPass},
		{ID: "3", Status: probe.StatusFail, Failed: []string{"Memory Bandwidth"}},
	}}
	label, out, ok = DCGMLevel3(fail, at)
	if !ok || label != "ERR_2024-10-10_19.12.03UTC" || out != "memory_bandwidth.0.3,page_retirement_row_remap.0" {
		t.Errorf("fail: %q %q %v", label, out, ok)
	}
	if _, _, ok := DCGMLevel3(probe.Result{Status: probe.StatusError}, at); ok {
		t.Error("an error wrote a verdict")
	}
}

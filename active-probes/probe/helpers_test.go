package probe

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The helpers below are also in package checks' tests (main_test.go), which run the
// checks through a Runner the same way; an internal test package of probe cannot
// import a helper package that imports probe.

// runOne registers spec (with a constructor returning pr) in a fresh registry and runs
// it through a Runner with metrics, as the agent will.
func runOne(t *testing.T, spec Spec, pr Probe, p Params) (Result, *prometheus.Registry) {
	t.Helper()
	reg := NewRegistry()
	spec.New = func(Config) Probe { return pr }
	reg.MustRegister(spec)
	prom := prometheus.NewRegistry()
	r := NewRunner(reg, Config{Node: "gpu-node-07"}, NewMetrics(prom))
	res, err := r.Run(context.Background(), spec.Name, p)
	if err != nil {
		t.Fatalf("run %s: %v", spec.Name, err)
	}
	t.Logf("%s: %s in %s: %s", spec.Name, res.Status, res.Duration.Round(time.Millisecond), res.Message)
	return res, prom
}

// mustSpec returns the registered spec of a
func mustSpec(t *testing.T, name string) Spec {
	t.Helper()
	s, ok := Default().Get(name)
	if !ok {
		t.Fatalf("probe %s not registered", name)
	}
	return s
}

func wantStatus(t *testing.T, what string, got, want Status) {
	t.Helper()
	if got != want {
		t.Errorf("%s: status %s, want %s", what, got, want)
	}
}

func deviceStatus(t *testing.T, res Result, id string, want Status) *DeviceResult {
	t.Helper()
	d := res.Device(id)
	if d == nil {
		t.Fatalf("no device %s in %+v", id, res.Devices)
	}
	if d.Status != want {
		t.Errorf("device %s: status %s (%s), want %s", id, d.Status, d.Message, want)
	}
	return d
}

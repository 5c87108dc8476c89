package probe

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/test/promtest"
)

func TestRegistryHasEveryProbe(t *testing.T) {
	want := map[string]struct {
		enabled, invasive bool
	}{
		"nvml": {true, false}, "pciebw": {false, true}, "dgemm": {false, true},
		"dcgm": {false, false}, "iperf3": {false, true}, "ping": {false, false}, "iperf3-server": {false, false},
		"gpu-reset": {false, true},
	}
	var names []string
	for _, s := range Default().List() {
		names = append(names, s.Name)
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected probe %s", s.Name)
			continue
		}
		// Resolve with the required parameters filled in.
		p := Params{}
		for _, ps := range s.Params {
			if ps.Required {
				p[ps.Name] = "127.0.0.1"
			}
		}
		resolved, err := s.Params.Resolve(p)
		if err != nil {
			t.Errorf("%s: defaults do not resolve: %v", s.Name, err)
		}
		if s.DefaultEnabled != w.enabled || s.IsInvasive(resolved) != w.invasive {
			t.Errorf("%s: enabled=%v invasive=%v, want %v %v", s.Name, s.DefaultEnabled, s.IsInvasive(resolved), w.enabled, w.invasive)
		}
		if s.Timeout(resolved) <= 0 || s.Help == "" {
			t.Errorf("%s: timeout %v, help %q", s.Name, s.Timeout(resolved), s.Help)
		}
		if s.New != nil {
			t.Errorf("%s: this package registers the metadata alone (package checks implements it)", s.Name)
		}
	}
	if len(names) != len(want) {
		t.Errorf("registered %v, want %d probes", names, len(want))
	}
	if got := Default().DefaultEnabled(); strings.Join(got, ",") != "nvml" {
		t.Errorf("default-enabled: %v", got)
	}
}

func TestRegistryWith(t *testing.T) {
	ctl := Spec{Name: "cluster-check", Help: "runs in the controller", RunsOn: OnController,
		New: func(Config) Probe { return funcProbe{name: "cluster-check"} }}
	r := Default().With(ctl)
	if s, ok := r.Get("cluster-check"); !ok || s.RunsOn != OnController {
		t.Errorf("With: %+v %v", s, ok)
	}
	if s, ok := r.Get("nvml"); !ok || s.RunsOn != OnNode {
		t.Errorf("With lost the node probes: %+v %v", s, ok)
	}
	if _, ok := Default().Get("cluster-check"); ok {
		t.Error("With changed the default registry")
	}
	defer func() {
		if recover() == nil {
			t.Error("With accepted a duplicate")
		}
	}()
	r.With(ctl)
}

// A check registered with its metadata alone is known (listed, its parameters
// checked) but runs only once implemented; it is implemented once.
func TestImplement(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(Spec{Name: "meta", Params: Schema{{Name: "n", Type: TypeInt, Max: 3}}})
	run := NewRunner(r, Config{}, nil)
	if _, err := run.Run(context.Background(), "meta", Params{"n": "2"}); !errors.Is(err, ErrNotImplemented) {
		t.Errorf("run before Implement: %v, want ErrNotImplemented", err)
	}
	if err := r.Implement("other", func(Config) Probe { return nil }); err == nil {
		t.Error("Implement of an unregistered check accepted")
	}
	impl := func(Config) Probe {
		return funcProbe{name: "meta", run: func(context.Context, Params) (Result, error) { return Result{Status: StatusPass}, nil }}
	}
	if err := r.Implement("meta", impl); err != nil {
		t.Fatal(err)
	}
	if err := r.Implement("meta", impl); err == nil {
		t.Error("second Implement accepted")
	}
	if res, err := run.Run(context.Background(), "meta", Params{"n": "2"}); err != nil || res.Status != StatusPass {
		t.Errorf("run after Implement: %+v %v", res, err)
	}
}

func TestRegisterRejectsBadSpecs(t *testing.T) {
	r := NewRegistry()
	ok := Spec{Name: "x", New: func(Config) Probe { return nil }}
	if err := r.Register(ok); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Spec{
		"duplicate":   ok,
		"no name":     {New: ok.New},
		"bad default": {Name: "z", New: ok.New, Params: Schema{{Name: "level", Type: TypeInt, Min: 1, Max: 3, Default: "7"}}},
		"repeated":    {Name: "w", New: ok.New, Params: Schema{{Name: "a", Type: TypeInt}, {Name: "a", Type: TypeInt}}},
	} {
		if err := r.Register(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of a duplicate did not panic")
		}
	}()
	r.MustRegister(ok)
}

func TestParamValidation(t *testing.T) {
	cases := []struct {
		probe string
		p     Params
		bad   string // parameter named in the error; "" means valid
	}{
		{"ping", Params{"peer": "127.0.0.1"}, ""},
		{"ping", Params{"peer": "gpu-node-08.cluster.local"}, ""},
		{"ping", Params{"peer": "::1", "count": "3"}, ""},
		{"ping", Params{}, "peer"},
		{"ping", Params{"peer": "-f"}, "peer"},
		{"ping", Params{"peer": "a..b"}, "peer"},
		{"ping", Params{"peer": "host;reboot"}, "peer"},
		{"ping", Params{"peer": "node_1"}, "peer"},
		{"ping", Params{"peer": strings.Repeat("a", 64) + ".example"}, "peer"},
		{"ping", Params{"peer": "127.0.0.1", "count": "0"}, "count"},
		{"ping", Params{"peer": "127.0.0.1", "count": "1001"}, "count"},
		{"ping", Params{"peer": "127.0.0.1", "interval": "0.01"}, "interval"},
		{"ping", Params{"peer": "127.0.0.1", "colour": "red"}, "colour"},
		{"iperf3", Params{"peer": "127.0.0.1", "port": "0"}, "port"},
		{"iperf3", Params{"peer": "127.0.0.1", "port": "65536"}, "port"},
		{"iperf3", Params{"peer": "127.0.0.1", "port": "http"}, "port"},
		{"iperf3", Params{"peer": "127.0.0.1", "bind": "eth0"}, "bind"},
		{"iperf3", Params{"peer": "127.0.0.1", "seconds": "600"}, "seconds"},
		{"iperf3", Params{"peer": "127.0.0.1", "reverse": "maybe"}, "reverse"},
		{"dcgm", Params{"level": "3"}, ""},
		{"dcgm", Params{"level": "4"}, "level"},
		{"dcgm", Params{"level": "0"}, "level"},
		{"dcgm", Params{"level": "one"}, "level"},
		{"dcgm", Params{"host": "127.0.0.1:5555"}, ""},
		{"dcgm", Params{"host": "127.0.0.1:99999"}, "host"},
		{"dcgm", Params{"gpus": "0,3,x"}, "gpus"},
		{"dcgm", Params{"gpus": "0,64"}, "gpus"},
		{"pciebw", Params{"ratio": "1.5"}, "ratio"},
		{"pciebw", Params{"size_mb": "-1"}, "size_mb"},
		{"pciebw", Params{"gpus": "0,3"}, ""},
		{"dgemm", Params{"thresholds": "relative.yaml"}, "thresholds"},
		{"dgemm", Params{"thresholds": "/nonexistent/thresholds.yaml"}, "thresholds"},
		{"nvml", Params{"expected_gpus": "8", "pcie_width_action": "warn"}, ""},
		{"nvml", Params{"pcie_width_action": "explode"}, "pcie_width_action"},
		{"nvml", Params{"expected_gpus": "65"}, "expected_gpus"},
	}
	for _, c := range cases {
		s := mustSpec(t, c.probe)
		_, err := s.Params.Resolve(c.p)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s %v: %v", c.probe, c.p, err)
		case c.bad != "" && err == nil:
			t.Errorf("%s %v: accepted", c.probe, c.p)
		case c.bad != "":
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != c.bad {
				t.Errorf("%s %v: error %q does not name %s", c.probe, c.p, err, c.bad)
			}
			t.Logf("%s: %v", c.probe, err)
		}
	}
	// Defaults are filled in and typed accessors read them.
	p, err := mustSpec(t, "ping").Params.Resolve(Params{"peer": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Int("count") != 10 || p.Float("interval") != 0.2 || p.Duration("wait") != time.Second || p.Float("max_loss_pct") != 10 {
		t.Errorf("defaults: %v", p)
	}
	// The dcgm level decides invasiveness and timeout.
	s := mustSpec(t, "dcgm")
	for level, want := range map[string]bool{"1": false, "2": true, "3": true} {
		p, _ := s.Params.Resolve(Params{"level": level})
		if s.IsInvasive(p) != want {
			t.Errorf("dcgm level %s invasive=%v", level, !want)
		}
	}
	p3, _ := s.Params.Resolve(Params{"level": "3"})
	if s.Timeout(p3) < 30*time.Minute {
		t.Errorf("dcgm level 3 timeout %v", s.Timeout(p3))
	}
}

func TestWorst(t *testing.T) {
	if w := Worst(StatusPass, StatusSkipped); w != StatusPass {
		t.Errorf("pass+skipped = %s", w)
	}
	if w := Worst(StatusSkipped, StatusSkipped); w != StatusSkipped {
		t.Errorf("skipped+skipped = %s", w)
	}
	if w := Worst(StatusWarn, StatusError, StatusPass); w != StatusError {
		t.Errorf("warn+error+pass = %s", w)
	}
	if w := Worst(StatusError, StatusFail); w != StatusFail {
		t.Errorf("error+fail = %s", w)
	}
	if w := Worst(); w != "" {
		t.Errorf("none = %q", w)
	}
}

// funcProbe is a probe made of a function, for the runner's tests.
type funcProbe struct {
	name string
	run  func(ctx context.Context, p Params) (Result, error)
}

func (f funcProbe) Run(ctx context.Context, p Params) (Result, error) { return f.run(ctx, p) }

func TestRunnerRecordsMetrics(t *testing.T) {
	gpus := 3
	pr := funcProbe{name: "fakegpu", run: func(ctx context.Context, p Params) (Result, error) {
		var r Result
		for i := 0; i < gpus; i++ {
			d := DeviceResult{ID: string(rune('0' + i)), Status: StatusPass}
			d.SetValue("tflops", 18.5+float64(i))
			r.Devices = append(r.Devices, d)
		}
		if gpus == 3 {
			r.Devices[1].Status, r.Devices[1].Message = StatusWarn, "slow"
			r.Devices[2].Status, r.Devices[2].Message = StatusFail, "slower"
		}
		r.SetValue("gpu_count", float64(gpus))
		return r, nil
	}}
	spec := Spec{Name: "fakegpu", DefaultTimeout: time.Second, Params: Schema{{Name: "n", Type: TypeInt, Default: "4", Min: 1, Max: 9, Help: "n"}}}
	res, prom := runOne(t, spec, pr, nil)
	wantStatus(t, "result", res.Status, StatusFail)
	if res.Node != "gpu-node-07" || res.Check != "fakegpu" || res.Params["n"] != "4" || res.Started.IsZero() {
		t.Errorf("result fields: %+v", res)
	}
	if !strings.Contains(res.Message, "2: fail (slower); 1: warn (slow)") {
		t.Errorf("message %q", res.Message)
	}
	node := map[string]string{"node": "gpu-node-07", "check": "fakegpu"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range node {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	promtest.Want(t, prom, "faultline_probe_result", with("device", ""), 0)
	promtest.Want(t, prom, "faultline_probe_result", with("device", "0"), 1)
	promtest.Want(t, prom, "faultline_probe_result", with("device", "1"), 0.5)
	promtest.Want(t, prom, "faultline_probe_result", with("device", "2"), 0)
	promtest.Want(t, prom, "faultline_probe_value", with("device", "2", "metric", "tflops"), 20.5)
	promtest.Want(t, prom, "faultline_probe_value", with("device", "", "metric", "gpu_count"), 3)
	promtest.Want(t, prom, "faultline_probe_success", map[string]string{"check": "fakegpu"}, 1)
	promtest.Want(t, prom, "faultline_probe_runs_total", map[string]string{"check": "fakegpu", "status": "fail"}, 1)
	if d, ok := promtest.Value(t, prom, "faultline_probe_duration_seconds", map[string]string{"check": "fakegpu"}); !ok || d < 0 {
		t.Errorf("duration %v %v", d, ok)
	}
}

func TestRunnerDropsStaleDevices(t *testing.T) {
	gpus := 2
	pr := funcProbe{name: "shrink", run: func(ctx context.Context, p Params) (Result, error) {
		var r Result
		for i := 0; i < gpus; i++ {
			r.Devices = append(r.Devices, DeviceResult{ID: string(rune('0' + i)), Status: StatusPass, Values: map[string]float64{"v": 1}})
		}
		return r, nil
	}}
	reg := NewRegistry()
	reg.MustRegister(Spec{Name: "shrink", New: func(Config) Probe { return pr }})
	prom := prometheus.NewRegistry()
	r := NewRunner(reg, Config{Node: "n1"}, NewMetrics(prom))
	if _, err := r.Run(context.Background(), "shrink", nil); err != nil {
		t.Fatal(err)
	}
	gpus = 1
	last, err := r.Run(context.Background(), "shrink", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := promtest.Value(t, prom, "faultline_probe_result", map[string]string{"node": "n1", "check": "shrink", "device": "1"}); ok {
		t.Error("device 1 kept its verdict after it disappeared")
	}
	if _, ok := promtest.Value(t, prom, "faultline_probe_value", map[string]string{"node": "n1", "check": "shrink", "device": "1", "metric": "v"}); ok {
		t.Error("device 1 kept its value after it disappeared")
	}
	promtest.Want(t, prom, "faultline_probe_runs_total", map[string]string{"check": "shrink", "status": "pass"}, 2)
	if len(last.Devices) != 1 {
		t.Errorf("second run: %+v", last)
	}
}

func TestRunnerTimeoutAndPanic(t *testing.T) {
	stuck := funcProbe{name: "stuck", run: func(ctx context.Context, p Params) (Result, error) {
		select {} // an NVML call that never returns
	}}
	start := time.Now()
	res, prom := runOne(t, Spec{Name: "stuck", DefaultTimeout: 200 * time.Millisecond}, stuck, nil)
	wantStatus(t, "stuck", res.Status, StatusError)
	if !strings.Contains(res.Message, "did not return") || time.Since(start) > 5*time.Second {
		t.Errorf("stuck probe: %q after %v", res.Message, time.Since(start))
	}
	promtest.Want(t, prom, "faultline_probe_success", map[string]string{"check": "stuck"}, 0)
	if _, ok := promtest.Value(t, prom, "faultline_probe_result", map[string]string{"node": "gpu-node-07", "check": "stuck", "device": ""}); ok {
		t.Error("an error has a result sample")
	}

	polite := funcProbe{name: "polite", run: func(ctx context.Context, p Params) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	}}
	res, _ = runOne(t, Spec{Name: "polite", DefaultTimeout: 100 * time.Millisecond}, polite, nil)
	wantStatus(t, "polite", res.Status, StatusError)
	if !strings.Contains(res.Message, "timed out after 100ms") {
		t.Errorf("polite probe: %q", res.Message)
	}

	boom := funcProbe{name: "boom", run: func(ctx context.Context, p Params) (Result, error) {
		var m map[string]int
		m["x"]++ // nil map write
		return Result{}, nil
	}}
	res, _ = runOne(t, Spec{Name: "boom"}, boom, nil)
	wantStatus(t, "boom", res.Status, StatusError)
	if !strings.Contains(res.Message, "panicked") {
		t.Errorf("panic: %q", res.Message)
	}
}

func TestRunnerRefusesBadRequests(t *testing.T) {
	var runs atomic.Int32
	pr := funcProbe{name: "p", run: func(ctx context.Context, p Params) (Result, error) {
		runs.Add(1)
		return Result{Status: StatusPass}, nil
	}}
	reg := NewRegistry()
	reg.MustRegister(Spec{Name: "p", New: func(Config) Probe { return pr },
		Params: Schema{{Name: "peer", Type: TypeHost, Target: TargetPeer, Required: true, Help: "peer"}}})
	prom := prometheus.NewRegistry()
	r := NewRunner(reg, Config{}, NewMetrics(prom))
	if _, err := r.Run(context.Background(), "nope", nil); !errors.Is(err, ErrUnknownProbe) {
		t.Errorf("unknown probe: %v", err)
	}
	_, err := r.Run(context.Background(), "p", Params{"peer": "--help"})
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Param != "peer" {
		t.Errorf("bad peer: %v", err)
	}
	if runs.Load() != 0 {
		t.Error("the probe ran on a bad request")
	}
	if _, ok := promtest.Value(t, prom, "faultline_probe_success", map[string]string{"check": "p"}); ok {
		t.Error("a refused request was recorded")
	}
}

func TestRunnerRefusesASecondInvasiveProbe(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	reg := NewRegistry()
	reg.MustRegister(Spec{Name: "stress", Invasive: true, New: func(Config) Probe {
		return funcProbe{name: "stress", run: func(ctx context.Context, p Params) (Result, error) {
			close(started)
			<-release
			return Result{Status: StatusPass}, nil
		}}
	}})
	reg.MustRegister(Spec{Name: "other", Invasive: true, New: func(Config) Probe {
		return funcProbe{name: "other", run: func(ctx context.Context, p Params) (Result, error) { return Result{Status: StatusPass}, nil }}
	}})
	r := NewRunner(reg, Config{Node: "n1"}, nil)
	done := make(chan error, 1)
	go func() { _, err := r.Run(context.Background(), "stress", nil); done <- err }()
	<-started
	var busy *BusyError
	if _, err := r.Run(context.Background(), "other", nil); !errors.As(err, &busy) || busy.Running != "stress" || busy.Node != "n1" {
		t.Errorf("second invasive run: %v, want *BusyError naming stress", err)
	}
	if _, err := r.ClaimInvasive("by hand"); !errors.As(err, &busy) {
		t.Errorf("claim while stress runs: %v, want *BusyError", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Free again: a claim covers the runs made under it, and no one else's.
	c, err := r.ClaimInvasive("batch")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(WithClaim(context.Background(), c), "other", nil); err != nil || res.Status != StatusPass {
		t.Errorf("run under the claim: %+v, %v", res, err)
	}
	if _, err := r.Run(context.Background(), "other", nil); !errors.As(err, &busy) || busy.Running != "batch" {
		t.Errorf("run beside the claim: %v, want *BusyError naming batch", err)
	}
	c.Release()
	c.Release()
	if _, err := r.Run(context.Background(), "other", nil); err != nil {
		t.Errorf("after release: %v", err)
	}
}

// The parameter tables in active-probes/README.md follow the schemas.
func TestREADMEDocumentsEveryParameter(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range Default().List() {
		i := strings.Index(doc, "#### "+s.Name+"\n")
		if i < 0 {
			t.Errorf("README has no section for %s", s.Name)
			continue
		}
		section := doc[i+5:]
		if j := strings.Index(section, "\n#"); j >= 0 {
			section = section[:j]
		}
		for _, p := range s.Params {
			row := "| `" + p.Name + "` |"
			if !strings.Contains(section, row) {
				t.Errorf("README section %s lacks parameter %s", s.Name, p.Name)
				continue
			}
			line := section[strings.Index(section, row):]
			line = line[:strings.IndexByte(line, '\n')]
			if p.Default != "" && !strings.Contains(line, "| "+p.Default+" |") {
				t.Errorf("README: %s.%s default is not %q: %s", s.Name, p.Name, p.Default, line)
			}
		}
	}
}

package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Component names one process the harness can run.
type Component string

// The components, in the order they are started.
const (
	Etcd              Component = "etcd"
	APIServer         Component = "kube-apiserver"
	ControllerManager Component = "kube-controller-manager"
	Loki              Component = "loki"
	Collector         Component = "otelcol"
	Prometheus        Component = "prometheus"
	Kwok              Component = "kwok"
)

// SkipMessage is what an integration test says when it skips in -short mode.
const SkipMessage = "integration test: needs real components; run make test"

// Options selects the components Start runs. The zero value starts nothing.
type Options struct {
	// Kubernetes runs etcd and kube-apiserver.
	Kubernetes bool
	// ControllerManager also runs kube-controller-manager (implies Kubernetes), with
	// the controllers in Controllers.
	ControllerManager bool
	// Controllers overrides the controllers kube-controller-manager runs
	// (default: the persistent-volume controllers a PVC test needs).
	Controllers []string
	// Loki runs a single-binary Grafana Loki.
	Loki bool
	// LokiLimits adds settings to Loki's limits_config (name: YAML value), for
	// example {"max_query_length": "1h"} to test a client against a limit.
	LokiLimits map[string]string
	// Collector runs the OpenTelemetry Collector with an OTLP/HTTP receiver that
	// exports to Loki's /otlp endpoint (implies Loki).
	Collector bool
	// CollectorMaxRequestBody, when > 0, sets the OTLP/HTTP receiver's
	// max_request_body_size in bytes (the collector's default is 20 MiB).
	CollectorMaxRequestBody int
	// CollectorAuth, when not nil, puts faultline's exporter authentication on the
	// collector's receiver (implies Collector and Kubernetes): see CollectorAuth.
	CollectorAuth *CollectorAuth
	// CollectorIntake, when not nil, makes the collector also send every log record
	// to the controller's intake (implies Collector): see CollectorIntake.
	CollectorIntake *CollectorIntake
	// LokiIndexLabels overrides the OTLP resource attributes Loki promotes to index
	// labels (default LokiIndexLabels).
	LokiIndexLabels []string
	// Prometheus, when not nil, runs Prometheus scraping the given targets.
	Prometheus *PrometheusOptions
	// Kwok, when not nil, runs kwok against the apiserver to simulate GPU nodes with
	// the kubelet's heartbeats (implies Kubernetes); see AddKwokNodes.
	Kwok *KwokOptions
}

// TB is the part of testing.TB the harness uses. Tests pass their *testing.T; the
// demo (cmd/faultline-demo) runs the same harness outside a test with its own TB.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}

// Integration skips the calling test in -short mode with SkipMessage, unless CI=true:
// under CI an integration test never skips. Start calls it, so tests only need it to
// skip before doing other expensive work. Outside a test binary it does nothing.
func Integration(t TB) {
	t.Helper()
	if testing.Testing() && testing.Short() && os.Getenv("CI") != "true" {
		t.Skip(SkipMessage)
	}
}

// Env is a set of running components. Its methods are safe for concurrent use.
type Env struct {
	dir string

	mu      sync.Mutex
	procs   map[Component]*process
	specs   map[Component]procSpec // last spec of each component, reused to restart in place
	order   []Component
	started map[Component]time.Duration

	kube *kubeState
	loki *lokiState
	otel *otelState
	prom *promState
	kwok *kwokState
}

// Start runs the components o selects on free 127.0.0.1 ports, with their data in
// t.TempDir(), and waits until each is ready. It registers a cleanup that stops them
// all and, if the test failed, logs the last lines of each component's log. In -short
// mode (and CI unset) it skips the test; otherwise any failure is fatal.
func Start(t TB, o Options) *Env {
	t.Helper()
	Integration(t)
	if o.ControllerManager || o.Kwok != nil {
		o.Kubernetes = true
	}
	if o.CollectorAuth != nil || o.CollectorIntake != nil {
		o.Collector, o.Kubernetes = true, true
	}
	if o.Collector {
		o.Loki = true
	}
	e := &Env{
		dir:     t.TempDir(),
		procs:   map[Component]*process{},
		specs:   map[Component]procSpec{},
		started: map[Component]time.Duration{},
	}
	t.Cleanup(func() { e.cleanup(t) })

	// Resolve binaries first, on the test goroutine (Binary may build and calls t.Fatal).
	var bins = map[Component]string{}
	if o.Kubernetes {
		bins[Etcd] = Binary(t, "etcd")
		bins[APIServer] = Binary(t, "kube-apiserver")
	}
	if o.ControllerManager {
		bins[ControllerManager] = Binary(t, "kube-controller-manager")
	}
	if o.Kwok != nil {
		bins[Kwok] = Binary(t, "kwok")
	}
	if o.Loki {
		bins[Loki] = Binary(t, "loki")
	}
	if o.Collector {
		bins[Collector] = Binary(t, "otelcol-faultline")
	}
	if o.Prometheus != nil {
		bins[Prometheus] = Binary(t, "prometheus")
	}

	// Independent chains start concurrently; each returns an error instead of failing
	// the test from another goroutine.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	run := func(f func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- f() }()
	}
	if o.Kubernetes {
		run(func() error {
			if err := e.startKubernetes(bins, o); err != nil {
				return err
			}
			if o.Kwok != nil {
				return e.startKwok(bins[Kwok], *o.Kwok)
			}
			return nil
		})
	}
	if o.Loki {
		run(func() error {
			if err := e.startLoki(bins[Loki], o.LokiLimits, o.LokiIndexLabels); err != nil {
				return err
			}
			if o.Collector && o.CollectorAuth == nil && o.CollectorIntake == nil {
				return e.startCollector(bins[Collector], o.CollectorMaxRequestBody, nil, o.CollectorIntake)
			}
			return nil
		})
	}
	if o.Prometheus != nil {
		run(func() error { return e.startPrometheus(bins[Prometheus], *o.Prometheus) })
	}
	wg.Wait()
	close(errs)
	var msgs []string
	for err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		t.Fatalf("testenv: start failed:\n%s", strings.Join(msgs, "\n"))
	}
	if o.CollectorAuth != nil || o.CollectorIntake != nil {
		// Its authenticator reviews tokens with the apiserver, and the intake's token
		// is issued by it: started after it.
		if err := e.startCollector(bins[Collector], o.CollectorMaxRequestBody, o.CollectorAuth, o.CollectorIntake); err != nil {
			t.Fatalf("testenv: start failed:\n%v", err)
		}
	}
	e.mu.Lock()
	var times []string
	for _, c := range e.order {
		times = append(times, fmt.Sprintf("%s %s", c, e.started[c].Round(10*time.Millisecond)))
	}
	e.mu.Unlock()
	t.Logf("testenv: ready in %s: %s", e.dir, strings.Join(times, ", "))
	if o.Kwok != nil && o.Kwok.Nodes > 0 {
		t0 := time.Now()
		e.AddKwokNodes(t, o.Kwok.Nodes)
		t.Logf("testenv: %d kwok nodes created in %s", o.Kwok.Nodes, time.Since(t0).Round(10*time.Millisecond))
	}
	return e
}

// Dir is the temporary directory holding the components' data, configs and logs.
func (e *Env) Dir() string { return e.dir }

// LogPath is the file that collects the stdout and stderr of a component.
func (e *Env) LogPath(c Component) string {
	return filepath.Join(e.dir, string(c)+".log")
}

// launch starts a component for the first time (fresh ports via build) and records it.
func (e *Env) launch(c Component, build func() (procSpec, error)) error {
	t0 := time.Now()
	p, spec, err := startWithRetry(build)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs[c] = p
	e.specs[c] = spec
	e.started[c] = time.Since(t0)
	e.order = append(e.order, c)
	return nil
}

// Stop stops a running component gracefully (SIGTERM, then SIGKILL after a grace
// period), keeping its data, for fault injection. Start brings it back on the same port.
func (e *Env) Stop(t TB, c Component) {
	t.Helper()
	e.mu.Lock()
	p := e.procs[c]
	e.mu.Unlock()
	if p == nil {
		t.Fatalf("testenv: Stop(%s): the component was not started", c)
	}
	if p.exited() {
		t.Fatalf("testenv: Stop(%s): the component is not running", c)
	}
	t0 := time.Now()
	p.stop(p.spec.stopGrace)
	t.Logf("testenv: %s stopped in %s", c, time.Since(t0).Round(10*time.Millisecond))
}

// Start restarts a component stopped with Stop on the same port, with the same data
// and configuration, and waits until it is ready.
func (e *Env) Start(t TB, c Component) {
	t.Helper()
	e.mu.Lock()
	p, spec := e.procs[c], e.specs[c]
	e.mu.Unlock()
	if p == nil {
		t.Fatalf("testenv: Start(%s): the component was never started (see Options)", c)
	}
	if !p.exited() {
		t.Fatalf("testenv: Start(%s): the component is still running", c)
	}
	t0 := time.Now()
	var np *process
	var err error
	// The old listener's port is normally free at once; retry briefly in case it is
	// not (err keeps the last try's error when none succeeds).
	_ = wait.ExponentialBackoff(wait.Backoff{Duration: 250 * time.Millisecond, Steps: 20}, func() (bool, error) {
		np, err = startProcess(spec)
		return err == nil || !errAddrInUse(err), nil
	})
	if err != nil {
		t.Fatalf("testenv: restart %s: %v", c, err)
	}
	d := time.Since(t0)
	e.mu.Lock()
	e.procs[c] = np
	e.started[c] = d
	e.mu.Unlock()
	t.Logf("testenv: %s restarted, ready in %s", c, d.Round(10*time.Millisecond))
}

// StopLoki stops Loki; see Stop.
func (e *Env) StopLoki(t TB) { t.Helper(); e.Stop(t, Loki) }

// StartLoki restarts Loki on the same port with the same data; see Start.
func (e *Env) StartLoki(t TB) { t.Helper(); e.Start(t, Loki) }

// StopAPIServer stops kube-apiserver (etcd keeps running); see Stop.
func (e *Env) StopAPIServer(t TB) { t.Helper(); e.Stop(t, APIServer) }

// StartAPIServer restarts kube-apiserver on the same port; see Start.
func (e *Env) StartAPIServer(t TB) { t.Helper(); e.Start(t, APIServer) }

// PID returns the process id of component c (0 when it does not run).
func (e *Env) PID(c Component) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.procs[c]
	if p == nil || p.exited() {
		return 0
	}
	if pids := p.pids(); len(pids) > 0 {
		return pids[0]
	}
	return 0
}

// processIDs returns the pids of every process the harness runs (components and their
// watchdogs), keyed by a descriptive name.
func (e *Env) processIDs() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for c, p := range e.procs {
		if p.exited() {
			continue
		}
		for i, pid := range p.pids() {
			name := string(c)
			if i > 0 {
				name += "-watchdog"
			}
			out[name] = pid
		}
	}
	return out
}

// cleanup kills every process (no grace: the data is thrown away) and, when the test
// failed, logs the tail of each component's log.
func (e *Env) cleanup(t TB) {
	e.mu.Lock()
	procs := make([]*process, 0, len(e.procs))
	for _, c := range e.order {
		procs = append(procs, e.procs[c])
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for i := len(procs) - 1; i >= 0; i-- {
		wg.Add(1)
		go func(p *process) { defer wg.Done(); p.kill() }(procs[i])
	}
	wg.Wait()
	if !t.Failed() {
		return
	}
	e.dumpLogs(t, 100)
}

func (e *Env) dumpLogs(t TB, lines int) {
	entries, err := filepath.Glob(filepath.Join(e.dir, "*.log"))
	if err != nil {
		return
	}
	sort.Strings(entries)
	for _, path := range entries {
		t.Logf("testenv: ----- last %d lines of %s -----\n%s", lines, filepath.Base(path), tailFile(path, lines))
	}
}

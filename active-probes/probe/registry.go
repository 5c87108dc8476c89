package probe

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Config is what the node gives its probes.
type Config struct {
	// Node is the Kubernetes node name the results are about.
	Node string
	// Commands maps a program's name to the path of its executable: "pciebw", "dgemm",
	// "dcgmi", "iperf3", "ping". A missing entry means the bare name, looked up in $PATH.
	Commands map[string]string
	// NVMLLibrary is the NVML shared library to load ("" means libnvidia-ml.so.1 from
	// the dynamic loader's search path).
	NVMLLibrary string
	// SysfsRoot is where sysfs is mounted ("" means /sys); the pciebw probe reads PCIe
	// link capabilities there when NVML is not available.
	SysfsRoot string
	// MaxIperf3Servers bounds the one-shot iperf3 servers listening at once (0:
	// DefaultMaxIperf3Servers); each holds a port of the node's network until its
	// idle timeout.
	MaxIperf3Servers int
}

// Command returns the configured path of a program, or its bare name.
func (c Config) Command(name string) string {
	if p := c.Commands[name]; p != "" {
		return p
	}
	return name
}

// Where says where a probe runs.
type Where string

// Where a probe runs.
const (
	// OnNode: on the node it examines, run by the node's probe agent (the default).
	OnNode Where = ""
	// OnController: in the controller, for the cluster as a whole (pvc).
	OnController Where = "controller"
)

// Spec is a probe's registration: its metadata, parameter schema and constructor.
// The node checks are registered by this package with their metadata alone, so that
// the controller, which only routes them to the agents, links none of their
// implementations; package checks (the agent's) gives each its constructor
// (Implement).
type Spec struct {
	Name string
	Help string
	// RunsOn says where the probe runs: OnNode (by the node's agent) or OnController.
	RunsOn Where
	// DefaultEnabled probes run when no check is named (the node's routine checks).
	DefaultEnabled bool
	// DefaultTimeout bounds one run (TimeoutFor, when set, decides per parameters).
	DefaultTimeout time.Duration
	TimeoutFor     func(Params) time.Duration
	// Invasive probes load the GPUs or the network enough to disturb a workload; a
	// caller runs them only on a node that is drained or idle. InvasiveFor, when set,
	// decides per parameters (dcgm: by level).
	Invasive    bool
	InvasiveFor func(Params) bool
	// Peer marks a check that measures against another node, named by its "peer"
	// parameter; a caller that knows nodes (the controller) may name the peer node
	// instead and let the check find its address.
	Peer bool
	// PeerServer names the check the peer must run first to serve a Peer check
	// (iperf3: Iperf3ServerCheck, a one-shot server on the "port" parameter); "" for
	// none.
	PeerServer string
	// Params is the parameter schema.
	Params Schema
	// New builds the probe for a node; nil where this program only knows the check
	// (the controller knows the node checks, the agents run them).
	New func(Config) Probe
}

// Timeout is the timeout for a run with the given (resolved) parameters.
func (s Spec) Timeout(p Params) time.Duration {
	if s.TimeoutFor != nil {
		if d := s.TimeoutFor(p); d > 0 {
			return d
		}
	}
	if s.DefaultTimeout > 0 {
		return s.DefaultTimeout
	}
	return time.Minute
}

// IsInvasive reports whether a run with the given (resolved) parameters is invasive.
func (s Spec) IsInvasive(p Params) bool {
	if s.InvasiveFor != nil {
		return s.InvasiveFor(p)
	}
	return s.Invasive
}

// Registry holds probe specs by name.
type Registry struct {
	mu    sync.RWMutex
	specs map[string]Spec
}

// NewRegistry returns an empty registry (tests build their own; probes register into
// the default one).
func NewRegistry() *Registry { return &Registry{specs: map[string]Spec{}} }

var defaultRegistry = NewRegistry()

// Default returns the registry the probes in this package register into.
func Default() *Registry { return defaultRegistry }

// Register adds a spec to the default registry. It panics on a duplicate or incomplete
// spec: registration happens in init functions, where a mistake must stop the program.
func Register(s Spec) { defaultRegistry.MustRegister(s) }

// MustRegister adds a spec and panics if it is invalid or its name is taken.
func (r *Registry) MustRegister(s Spec) {
	if err := r.Register(s); err != nil {
		panic(err)
	}
}

// Register adds a spec. It refuses an empty name, a duplicate name and a default that
// its own schema rejects.
func (r *Registry) Register(s Spec) error {
	if s.Name == "" {
		return fmt.Errorf("probe: spec %q needs a name", s.Name)
	}
	seen := map[string]bool{}
	for _, ps := range s.Params {
		if ps.Name == "" || seen[ps.Name] {
			return fmt.Errorf("probe %s: parameter name %q empty or repeated", s.Name, ps.Name)
		}
		seen[ps.Name] = true
		if (ps.Type == TypeHost || ps.Type == TypeHostPort || ps.Type == TypeFile || ps.Type == TypePort) && ps.Target == "" {
			return fmt.Errorf("probe %s: parameter %s names a host, port or file but has no Target for the allow-list", s.Name, ps.Name)
		}
		if ps.Default != "" {
			if err := ps.validate(ps.Default); err != nil {
				return fmt.Errorf("probe %s: default of %s: %v", s.Name, ps.Name, err)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.specs[s.Name]; dup {
		return fmt.Errorf("probe %s registered twice", s.Name)
	}
	r.specs[s.Name] = s
	return nil
}

// Implement gives the check registered in the default registry under name its
// constructor. It panics on an unknown name or a check implemented twice: it is
// called from init functions, where a mistake must stop the program.
func Implement(name string, newProbe func(Config) Probe) {
	if err := defaultRegistry.Implement(name, newProbe); err != nil {
		panic(err)
	}
}

// Implement gives the registered check name its constructor.
func (r *Registry) Implement(name string, newProbe func(Config) Probe) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.specs[name]
	switch {
	case !ok:
		return fmt.Errorf("probe %s: implemented but not registered", name)
	case s.New != nil:
		return fmt.Errorf("probe %s implemented twice", name)
	case newProbe == nil:
		return fmt.Errorf("probe %s: nil constructor", name)
	}
	s.New = newProbe
	r.specs[name] = s
	return nil
}

// With returns a new registry holding r's specs and extra (the controller's
// registry: the node probes plus the checks it runs itself). It panics on a duplicate
// or invalid extra spec, as MustRegister.
func (r *Registry) With(extra ...Spec) *Registry {
	out := NewRegistry()
	for _, s := range r.List() {
		out.MustRegister(s)
	}
	for _, s := range extra {
		out.MustRegister(s)
	}
	return out
}

// Get returns the spec of a probe.
func (r *Registry) Get(name string) (Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.specs[name]
	return s, ok
}

// List returns all specs, sorted by name.
func (r *Registry) List() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, 0, len(r.specs))
	for _, s := range r.specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DefaultEnabled returns the names of the probes enabled by default, sorted.
func (r *Registry) DefaultEnabled() []string {
	var names []string
	for _, s := range r.List() {
		if s.DefaultEnabled {
			names = append(names, s.Name)
		}
	}
	return names
}

// Package steps carries out the remediation steps of the rules' escalation ladders
// (drain, service, ...), one step a file, each registered under the name of its
// spec in rules/stepspec (what the step is: parameters, capacity, permissions). It
// follows the shape of the probe registry (active-probes/probe): a step's file
// registers its Do from an init function; the escalation (controller/escalate)
// looks it up by the step's action and calls it with the dependencies the
// controller injects.
package steps

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/rules/stepspec"
)

// Nodes is what the steps do to a Node through the Kubernetes API (act.Actor):
// the taint, the drain helper, the service marks.
type Nodes interface {
	BootID(node string) (string, error)
	TaintNode(ctx context.Context, f fault.Fault, bootID string) (act.Result, error)
	Drain(ctx context.Context, node string, opts act.DrainOptions) (act.DrainResult, error)
	MarkForService(ctx context.Context, node, message string) error
}

// GPUs resets a fault's GPUs through the node's probe agent (trigger.Triggers).
type GPUs interface {
	ResetGPUs(ctx context.Context, f fault.Fault) (trigger.Reset, error)
}

// Deps are what the steps are given to act with.
type Deps struct {
	Nodes Nodes
	// Remediator creates remediation objects (the dynamic client); nil: a
	// remediate step fails (recorded) until one is configured.
	Remediator *act.Remediator
	GPUs       GPUs
	// NotApplied gives back the budget grant of a taint that was not placed (the
	// decider's).
	NotApplied func(fault.Fault)
	// DrainTimeout bounds one drain attempt (act.DefaultDrainTimeout when 0);
	// DrainGraceSeconds, when set, overrides the pods' termination grace period.
	DrainTimeout      time.Duration
	DrainGraceSeconds *int
	// Namespace is the controller's: where a namespaced remediation object without
	// one goes.
	Namespace string
	Log       *slog.Logger
}

// Target is the step to take and the fault it is taken for.
type Target struct {
	Fault fault.Fault
	// Record is the fault's NodeFault as last read.
	Record *v1alpha1.NodeFault
	Step   decide.Step
}

// Result is how far a step got without an error: done, or waiting on the cluster
// (a PodDisruptionBudget, GPUs in use) and to be tried again at the next reconcile.
type Result struct {
	Waiting bool
	// Message says what was done, or what is waited on.
	Message string
}

// Done is the result of a step carried out.
func Done(msg string) Result { return Result{Message: msg} }

// Waiting is the result of a step that waits.
func Waiting(msg string) Result { return Result{Waiting: true, Message: msg} }

// Do carries a step out on the fault's node. An error is a failed step (recorded,
// tried again at the next reconcile).
type Do func(ctx context.Context, d Deps, t Target) (Result, error)

// Registry holds the steps' Do by name.
type Registry struct {
	mu  sync.RWMutex
	dos map[string]Do
}

// NewRegistry returns an empty registry (the steps register into Default).
func NewRegistry() *Registry { return &Registry{dos: map[string]Do{}} }

var defaultRegistry = NewRegistry()

// Default returns the registry the steps of this package register into.
func Default() *Registry { return defaultRegistry }

// Register adds a step to the default registry. It panics on a name without a
// spec or taken: registration happens in init functions, where a mistake must stop
// the program.
func Register(name string, do Do) {
	if err := defaultRegistry.Register(name, do); err != nil {
		panic(err)
	}
}

// Register adds a step's Do under the name of its spec (rules/stepspec).
func (r *Registry) Register(name string, do Do) error {
	if _, ok := stepspec.Get(name); !ok || do == nil {
		return fmt.Errorf("steps: %q has no spec in rules/stepspec, or no Do", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.dos[name]; dup {
		return fmt.Errorf("steps: %s registered twice", name)
	}
	r.dos[name] = do
	return nil
}

// Get returns the Do of the step named name.
func (r *Registry) Get(name string) (Do, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	do, ok := r.dos[name]
	return do, ok
}

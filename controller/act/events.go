package act

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// Event reasons, one per kind of decision.
const (
	// ReasonTainted: a fault's taint was placed (or the fault recorded on a node
	// already carrying its taint).
	ReasonTainted = "FaultTainted"
	// ReasonEvent: a rule with action event fired; nothing else is done.
	ReasonEvent = "FaultEvent"
	// ReasonAnnotated: a rule in mode annotate fired: the fault is recorded, no
	// taint placed and no probe run.
	ReasonAnnotated = "FaultAnnotated"
	// ReasonHeld: a taint was held back (budget exhausted, probe pending, cooldown).
	ReasonHeld = "FaultHeld"
	// ReasonStormHold: a taint was held back because too many nodes fault at once.
	ReasonStormHold = "FaultStormHold"
	// ReasonUntainted: faults were cleared and faultline's taints removed.
	ReasonUntainted = "FaultUntainted"
	// ReasonDryRun: what would have been done, in dry-run mode.
	ReasonDryRun = "FaultDryRun"
	// ReasonOptedOut: a fault on a node labelled fault.LabelOptOut=true was not applied.
	ReasonOptedOut = "FaultOptedOut"
	// ReasonPackReloadFailed: a rule pack failed to load; the last good set stays.
	ReasonPackReloadFailed = "PackReloadFailed"
	// ReasonProbePassed and ReasonProbeFailed: one Event per probe run on a node
	// (failed also covers checks that could not reach a verdict).
	ReasonProbePassed = "ProbePassed"
	ReasonProbeFailed = "ProbeFailed"
)

// Annotations faultline puts on its Events, for filtering.
const (
	EventAnnotationRule     = "faultline.io/rule"
	EventAnnotationSeverity = "faultline.io/severity"
)

// messageLimit bounds Event messages and condition messages (the events.k8s.io
// API's limit on a note).
const messageLimit = 1024

// EventType is the Event type faultline uses for a reason: Normal for what
// restores or only reports (untaint, dry run, opt-out), Warning otherwise.
func EventType(reason string) string {
	switch reason {
	case ReasonUntainted, ReasonDryRun, ReasonOptedOut, ReasonProbePassed:
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// Event records a Kubernetes Event on a Node (involvedObject: kind Node, its name and
// UID) for a decision about fault f (f.Rule may be nil for decisions about no single
// rule). The type follows EventType(reason). The Event is sent asynchronously; in
// dry-run mode it is sent too (Events are dry-run's output).
func (a *Actor) Event(ctx context.Context, node string, f fault.Fault, reason, message string) error {
	n, err := a.cachedNode(ctx, node)
	if err != nil {
		return fmt.Errorf("event %s on node %s: %w", reason, node, err)
	}
	rule, sev := "", ""
	if f.Rule != nil {
		rule, sev = f.Rule.String(), string(f.Rule.Severity)
	}
	a.eventOnNode(n, rule, sev, reason, message)
	return nil
}

// EventOn records an Event on any object the scheme knows (the controller's Pod, the
// ConfigMap of a pack that failed to reload, ...). The object needs at least its
// name, namespace and UID.
func (a *Actor) EventOn(object runtime.Object, eventType, reason, message string) error {
	if object == nil {
		return errors.New("act: event on a nil object")
	}
	if eventType != corev1.EventTypeNormal && eventType != corev1.EventTypeWarning {
		return fmt.Errorf("act: event type %q is neither Normal nor Warning", eventType)
	}
	if err := a.ready(); err != nil {
		return err
	}
	a.recorder.Event(object, eventType, reason, nodefault.Truncate(message, messageLimit))
	return nil
}

func (a *Actor) eventOnNode(n *corev1.Node, rule, severity, reason, message string) {
	if n == nil {
		return
	}
	ann := map[string]string{}
	if rule != "" {
		ann[EventAnnotationRule] = nodefault.Truncate(rule, 256)
	}
	if severity != "" {
		ann[EventAnnotationSeverity] = severity
	}
	if len(ann) == 0 {
		ann = nil
	}
	a.recorder.AnnotatedEventf(n, ann, EventType(reason), reason, "%s", nodefault.Truncate(message, messageLimit))
}

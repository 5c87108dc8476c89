package act

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/client-go/tools/record"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

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

// events posts the Actor's Events: on Nodes, on the faults' NodeFault records, on
// any object the scheme knows.
type events struct {
	view     *View
	recorder record.EventRecorder
	records  *nodefault.Store
}

// Event records a Kubernetes Event on a Node (involvedObject: kind Node, its name and
// UID) for a decision about fault f (f.Rule may be nil for decisions about no single
// rule), and on f's NodeFault when it has one. The type follows EventType(reason). The Event is sent asynchronously; in
// dry-run mode it is sent too (Events are dry-run's output).
func (e *events) Event(ctx context.Context, node string, f fault.Fault, reason, message string) error {
	n, err := e.view.cachedNode(ctx, node)
	if err != nil {
		return fmt.Errorf("event %s on node %s: %w", reason, node, err)
	}
	rule, sev := "", ""
	if f.Rule != nil {
		rule, sev = f.Rule.String(), string(f.Rule.Severity)
	}
	e.eventOnNode(n, rule, sev, reason, message)
	if f.Rule != nil {
		if err := e.eventOnRecord(ctx, node, f.Rule.Pack, f.Rule.ID, sev, reason, message); err != nil {
			return fmt.Errorf("event %s on the NodeFault of %s on node %s: %w", reason, f.Rule, node, err)
		}
	}
	return nil
}

// EventOn records an Event on any object the scheme knows (the controller's Pod, the
// ConfigMap of a pack that failed to reload, ...). The object needs at least its
// name, namespace and UID.
func (e *events) EventOn(object runtime.Object, eventType, reason, message string) error {
	if object == nil {
		return errors.New("act: event on a nil object")
	}
	if eventType != corev1.EventTypeNormal && eventType != corev1.EventTypeWarning {
		return fmt.Errorf("act: event type %q is neither Normal nor Warning", eventType)
	}
	if err := e.view.ready(); err != nil {
		return err
	}
	e.recorder.Event(object, eventType, reason, nodefault.Truncate(message, messageLimit))
	return nil
}

func (e *events) eventOnNode(n *corev1.Node, rule, severity, reason, message string) {
	if n == nil {
		return
	}
	e.recorder.AnnotatedEventf(n, eventAnnotations(rule, severity), EventType(reason), reason, "%s", nodefault.Truncate(message, messageLimit))
}

// eventOnRecord posts the Event about the fault of pack/rule on node on its
// NodeFault too, so that kubectl describe nodefault lists it; nothing when the
// fault has no record (a rule with action event, a rule in mode observe). The
// recorder's spam filter counts per involved object: the record's Events do not
// take from its Node's.
func (e *events) eventOnRecord(ctx context.Context, node, pack, rule, severity, reason, message string) error {
	ref, err := e.records.Ref(ctx, node, pack, rule)
	if err != nil || ref == nil {
		return err
	}
	e.recorder.AnnotatedEventf(ref, eventAnnotations(pack+"/"+rule, severity), EventType(reason), reason, "%s", nodefault.Truncate(message, messageLimit))
	return nil
}

// eventOnFault is eventOnRecord for fault f after a write the caller reports
// (taint, untaint): a failure is handed to the runtime's error handler (logged) as
// the recorder's own are, the Node having the Event already.
func (e *events) eventOnFault(ctx context.Context, node, pack, rule, severity, reason, message string) {
	if err := e.eventOnRecord(ctx, node, pack, rule, severity, reason, message); err != nil {
		utilruntime.HandleError(fmt.Errorf("event %s on the NodeFault of %s/%s on %s: %w", reason, pack, rule, node, err))
	}
}

func eventAnnotations(rule, severity string) map[string]string {
	ann := map[string]string{}
	if rule != "" {
		ann[EventAnnotationRule] = nodefault.Truncate(rule, 256)
	}
	if severity != "" {
		ann[EventAnnotationSeverity] = severity
	}
	if len(ann) == 0 {
		return nil
	}
	return ann
}

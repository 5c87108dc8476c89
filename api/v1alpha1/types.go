package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is where a fault stands.
//
// +kubebuilder:validation:Enum=Observed;Held;Confirming;AwaitingIdle;Tainted;Recovering;Resolved
type Phase string

// Phases of a NodeFault.
const (
	// PhaseObserved: the rule fired and was recorded without acting (a rule in mode
	// annotate, or dry-run). The allowed changes of phase and their causes are in
	// docs/lifecycle.md.
	PhaseObserved Phase = "Observed"
	// PhaseHeld: the taint waits for room in a budget, the end of a storm, the
	// node's opt-out label to go, or an operator's verdict on a fleet fault.
	PhaseHeld Phase = "Held"
	// PhaseConfirming: probes run to confirm the fault before a taint.
	PhaseConfirming Phase = "Confirming"
	// PhaseAwaitingIdle: the confirming probe's harmless checks found nothing, and
	// its invasive ones wait for the pods holding the node's GPUs to end; the node
	// may carry the rule's taint key with the value UnconfirmedTaintValue meanwhile
	// (probe.whileBusy).
	PhaseAwaitingIdle Phase = "AwaitingIdle"
	// PhaseTainted: the node carries the rule's taint.
	PhaseTainted Phase = "Tainted"
	// PhaseRecovering: recovery probes run before the taint is removed.
	PhaseRecovering Phase = "Recovering"
	// PhaseResolved: the fault is over (recovered, untainted, not confirmed by its
	// probe, or dismissed with a fleet fault); the object is kept for the retention
	// period.
	PhaseResolved Phase = "Resolved"
)

// UnconfirmedTaintValue is the value of a rule's taint placed unconfirmed: the rule's
// key and effect (so the budget, the untaint and the records treat it as the rule's
// taint) with a value that says its probe is not done. Its invasive checks wait for
// the node's GPUs; a failure puts the rule's own value in its place, a pass removes
// it. Operators select on it (kubectl get nodes, alerts), so it is part of the API.
const UnconfirmedTaintValue = "unconfirmed"

// NodeFault is one fault of one node: a rule of a pack that fired there. Its name
// is derived from the node, the pack and the rule (see Name).
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nf,categories=faultline
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Scope",type=string,JSONPath=`.spec.scope`,priority=1
// +kubebuilder:printcolumn:name="Rule",type=string,JSONPath=`.spec.rule`
// +kubebuilder:printcolumn:name="Pack",type=string,JSONPath=`.spec.pack`,priority=1
// +kubebuilder:printcolumn:name="Severity",type=string,JSONPath=`.spec.severity`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.escalation.action`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name="Count",type=integer,JSONPath=`.status.count`
// +kubebuilder:printcolumn:name="Last-Seen",type=date,JSONPath=`.status.lastSeen`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeFault struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeFaultSpec   `json:"spec"`
	Status NodeFaultStatus `json:"status,omitempty"`
}

// Scope is what a NodeFault is about.
// +kubebuilder:validation:Enum=Node;Fleet
type Scope string

// Scopes.
const (
	// ScopeNode: one node's fault.
	ScopeNode Scope = "Node"
	// ScopeFleet: a fleet fault: many nodes of one topology group (spec.group) hit
	// the rules of one pack within a window; their taints are held until an
	// operator releases or dismisses it.
	ScopeFleet Scope = "Fleet"
)

// FleetGroup is the topology group of a fleet fault: the nodes whose label Label
// has the value Value.
type FleetGroup struct {
	// +kubebuilder:validation:MinLength=1
	Label string `json:"label"`
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value"`
}

// NodeFaultSpec identifies the fault; it does not change over the object's life,
// but for a fleet fault's rule and severity, which follow its members.
type NodeFaultSpec struct {
	// Scope is Node (the default) for one node's fault, Fleet for a fleet fault.
	// +optional
	// +kubebuilder:default=Node
	Scope Scope `json:"scope,omitempty"`
	// Group is the topology group of a fleet fault.
	// +optional
	Group *FleetGroup `json:"group,omitempty"`
	// Node is the name of the faulty node; for a fleet fault, its group as
	// label=value.
	// +kubebuilder:validation:MinLength=1
	Node string `json:"node"`
	// Pack is the rule pack of the rule.
	// +kubebuilder:validation:MinLength=1
	Pack string `json:"pack"`
	// Rule is the id of the rule that fired; for a fleet fault, the ids of the
	// rules of the pack its members hit, joined by "," ("*": none known yet). It
	// grows when the members hit another rule.
	// +kubebuilder:validation:MinLength=1
	Rule string `json:"rule"`
	// Severity is the rule's severity (critical, warning, info); for a fleet
	// fault, the highest of its members' rules.
	// +optional
	Severity string `json:"severity,omitempty"`
	// Action is the rule's action (taint, probe).
	// +optional
	Action string `json:"action,omitempty"`
	// Taint is the taint the rule asks for, as key=value:effect.
	// +optional
	Taint string `json:"taint,omitempty"`
	// Description is the rule's description.
	// +optional
	Description string `json:"description,omitempty"`
	// Request is an operator's request on this fault, carried out by the leading
	// controller, which answers in status.request. It is the only field of the spec
	// an operator writes (the chart's admission policy refuses any other change by
	// anyone but the controller, and a request whose requestedBy is not the
	// requester).
	// +optional
	Request *Request `json:"request,omitempty"`
}

// RequestAction is what an operator asks of a fault.
// +kubebuilder:validation:Enum=Resolve;Release;Dismiss;ReleaseStorm
type RequestAction string

// Request actions.
const (
	// RequestResolve removes the fault's taint from its node and resolves the fault
	// (a node fault; the node was repaired, or the fault was wrong).
	RequestResolve RequestAction = "Resolve"
	// RequestRelease is a fleet fault's verdict: its held members are tainted, each
	// within the budgets.
	RequestRelease RequestAction = "Release"
	// RequestDismiss is a fleet fault's verdict: its held members are dropped, no
	// taint (the cause was shared and is fixed).
	RequestDismiss RequestAction = "Dismiss"
	// RequestReleaseStorm ends the storm that holds the fault's rule: its held
	// faults go ahead within the budgets.
	RequestReleaseStorm RequestAction = "ReleaseStorm"
)

// Request is an operator's request on a fault.
type Request struct {
	Action RequestAction `json:"action"`
	// RequestedBy is the requester's username as the API server authenticated it
	// (the admission policy refuses any other name), so the record of who asked
	// can be trusted.
	// +kubebuilder:validation:MinLength=1
	RequestedBy string `json:"requestedBy"`
	// Reason says why, for the record.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// Time is when the request was made; a new request on the same fault has a new
	// time.
	Time metav1.Time `json:"time"`
}

// RequestStatus is the controller's answer to the last request it carried out.
type RequestStatus struct {
	// Request is the request answered, as it was made.
	Request `json:",inline"`
	// Result is Done, or Refused (the request does not apply to this fault, or
	// the controller could not carry it out: Message says why).
	// +kubebuilder:validation:Enum=Done;Refused
	Result string `json:"result"`
	// Message says what was done, or why not.
	// +optional
	Message string `json:"message,omitempty"`
	// Done is when the controller answered.
	Done metav1.Time `json:"done"`
}

// Results of a request.
const (
	RequestDone    = "Done"
	RequestRefused = "Refused"
)

// Pending reports whether the fault carries a request the controller has not
// answered yet.
func (nf *NodeFault) Pending() bool {
	r := nf.Spec.Request
	if r == nil {
		return false
	}
	a := nf.Status.Request
	return a == nil || a.Action != r.Action || !a.Time.Equal(&r.Time) || a.RequestedBy != r.RequestedBy
}

// NodeFaultStatus is the controller's record of the fault.
type NodeFaultStatus struct {
	// Mode is the mode the rule acted in at the last decision: annotate (recorded,
	// no taint or probe) or enforce (the rule's action); the rule's own mode lowered
	// to the controller's ceiling. Rules in mode observe write no record.
	// +optional
	// +kubebuilder:validation:Enum=observe;annotate;enforce
	Mode string `json:"mode,omitempty"`
	// Phase is where the fault stands.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Reason is a one-word reason of the phase (budget, storm, opted-out, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the phase.
	// +optional
	Message string `json:"message,omitempty"`
	// Owner is the identity of the controller replica that last wrote the record.
	// +optional
	Owner string `json:"owner,omitempty"`
	// Count is the number of the rule's matches on the node within its threshold
	// window when it last fired (a rule without a threshold fires on each match: 1).
	// +optional
	Count int32 `json:"count,omitempty"`
	// Firings is the number of the rule's firings on the node written to this
	// record, each counted once (a firing the decision and the escalation ladder both
	// write counts once). A repeat within the evidence refresh period of a fault
	// already recorded in the same phase is not written, so is not counted, unless
	// the rule has an escalation ladder (which records every firing).
	// +optional
	Firings int32 `json:"firings,omitempty"`
	// FirstSeen and LastSeen are the times of the first and the last firing's line.
	// +optional
	FirstSeen *metav1.Time `json:"firstSeen,omitempty"`
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// HeldSince is when the fault was first held (phase Held).
	// +optional
	HeldSince *metav1.Time `json:"heldSince,omitempty"`
	// ResolvedAt is when the fault reached phase Resolved; the object is deleted a
	// retention period later.
	// +optional
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`
	// BootID is the node's boot id when the fault was recorded (recover: reboot).
	// +optional
	BootID string `json:"bootID,omitempty"`
	// Recover is the rule's recovery policy, as text ("manual", "after 24h", ...).
	// +optional
	Recover string `json:"recover,omitempty"`
	// Captures are the named groups the rule's regex captured (xid, pci, ...).
	// +optional
	Captures map[string]string `json:"captures,omitempty"`
	// Evidence holds the log lines behind the fault, oldest first: the first ones
	// recorded (those that caused the first decision) and the newest ones, with
	// EvidenceOmitted lines left out between them when there were more than the
	// controller keeps.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Evidence []EvidenceLine `json:"evidence,omitempty"`
	// EvidenceOmitted is the number of lines left out of Evidence between the first
	// and the newest ones.
	// +optional
	EvidenceOmitted int32 `json:"evidenceOmitted,omitempty"`
	// Query is the LogQL query of the rule's lines on the node: the stream selector
	// of the rule's source, the node, and a line filter of the rule's regex (its
	// literals when the regex cannot be used).
	// +optional
	Query string `json:"query,omitempty"`
	// Link opens Query in Grafana's Explore view (when a Grafana URL is configured).
	// +optional
	Link string `json:"link,omitempty"`
	// Probes are the verdicts of the probes run for the fault, newest last.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Probes []ProbeVerdict `json:"probes,omitempty"`
	// History lists the controller's decisions on the fault, newest last.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	History []Decision `json:"history,omitempty"`
	// Taint is the controller's bookkeeping of the fault's taint on the Node: the
	// only proof of which taints faultline placed (a Node's own annotations are never
	// trusted for that). Absent when the fault has no taint recorded on the node.
	// +optional
	Taint *TaintRecord `json:"taint,omitempty"`
	// Members are, for a fleet fault, the nodes of its group that hit its pack's
	// rules (at most 1024, sorted).
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Members []string `json:"members,omitempty"`

	// Escalation is where the fault stands on its rule's escalation ladder: the
	// step reached, when and why. Absent for a rule without a ladder.
	// +optional
	Escalation *Escalation `json:"escalation,omitempty"`

	// Affected are the pods that held the node's GPUs when the fault was recorded
	// (its first firing written, or its reopening): the jobs it touched. Later
	// repeats leave the list as it was. Absent for a fleet fault and for records
	// written without the controller's pod watch.
	// +optional
	Affected *AffectedPods `json:"affected,omitempty"`

	// Request is the controller's answer to the last operator's request
	// (spec.request): who asked what, when, and what was done.
	// +optional
	Request *RequestStatus `json:"request,omitempty"`
}

// AffectedPods are the pods that held a faulty node's GPUs when its fault was
// recorded.
type AffectedPods struct {
	// Time is when the pods were listed.
	Time metav1.Time `json:"time"`
	// Pods are the pods, sorted by namespace and name, at most 20.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Pods []AffectedPod `json:"pods,omitempty"`
	// Omitted is the number of such pods left out of Pods.
	// +optional
	Omitted int32 `json:"omitted,omitempty"`
}

// AffectedPod is one pod that held GPUs of the faulty node.
type AffectedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID tells this pod from a later one of the same name.
	UID string `json:"uid"`
	// GPUs is the number of GPUs (or MIG slices) the pod's containers request.
	GPUs int32 `json:"gpus"`
	// Owner is the pod's top controller: its controller owner reference followed up
	// through ReplicaSets and Jobs (Deployment, CronJob, JobSet, ...); a custom
	// kind (PyTorchJob, RayCluster, ...) as the reference names it. Absent for a
	// pod nothing controls.
	// +optional
	Owner *WorkloadRef `json:"owner,omitempty"`
}

// WorkloadRef names a workload in the pod's namespace, as an owner reference does.
type WorkloadRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// StepState is the state of the escalation step reached.
type StepState string

// Step states.
const (
	// StepDone: the step's action was carried out.
	StepDone StepState = "Done"
	// StepWaiting: the step is under way and waits (an eviction a
	// PodDisruptionBudget blocks, a GPU in use); it is retried.
	StepWaiting StepState = "Waiting"
	// StepHeld: the step takes capacity and a budget or a storm holds it.
	StepHeld StepState = "Held"
	// StepFailed: the step's action failed; it is retried.
	StepFailed StepState = "Failed"
)

// Escalation records a fault's climb of its rule's ladder.
type Escalation struct {
	// Step is the number (1-based) of the last step reached; 0 when none is.
	Step int32 `json:"step"`
	// Action is that step's action: taint, drain, gpu-reset, remediate, service.
	// +optional
	Action string `json:"action,omitempty"`
	// State is how far the step got.
	// +optional
	State StepState `json:"state,omitempty"`
	// Time is when the step was reached; before the first, the time of the firing
	// the climb counts from.
	// +optional
	Time *metav1.MicroTime `json:"time,omitempty"`
	// Reason is the step's trigger: why it was reached.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says what the step did or waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// Firings are the rule's firings on the node (time and boot id), newest last:
	// what the repeat and reboots triggers count.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Firings []Firing `json:"firings,omitempty"`
}

// Firing is one firing of the fault's rule on its node.
type Firing struct {
	// Time is the time of the firing's line (to the microsecond: firings of one
	// second are told apart).
	Time metav1.MicroTime `json:"time"`
	// BootID is the node's boot id when the line was written, when known.
	// +optional
	BootID string `json:"bootID,omitempty"`
}

// TaintState is where the fault's taint stands on the Node.
//
// +kubebuilder:validation:Enum=Placing;Placed;Existing
type TaintState string

// States of a TaintRecord.
const (
	// TaintPlacing is written before the Node update that adds the taint (or takes
	// it over from another fault): a record left in it by a crash is checked against
	// the Node by the next leader, which adopts the taint or clears the record.
	TaintPlacing TaintState = "Placing"
	// TaintPlaced: faultline placed the taint for this fault and owns it; it removes
	// it when the fault is cleared.
	TaintPlaced TaintState = "Placed"
	// TaintExisting: the node already carried a taint with the same key and effect
	// (someone else's, or another fault's); faultline keeps it as it is and never
	// removes it for this fault.
	TaintExisting TaintState = "Existing"
)

// TaintRecord is the taint a fault asks for and whether faultline placed it.
type TaintRecord struct {
	// Taint is the taint, as key=value:effect.
	// +kubebuilder:validation:MinLength=1
	Taint string `json:"taint"`
	// State says whether faultline placed it (Placed), is placing it (Placing), or
	// found it there (Existing).
	State TaintState `json:"state"`
	// Time is when the state was written.
	Time metav1.Time `json:"time"`
}

// EvidenceLine is one log line behind the fault.
type EvidenceLine struct {
	// Time is the line's time.
	Time metav1.Time `json:"time"`
	// Text is the line, truncated to a bounded length.
	Text string `json:"text"`
}

// ProbeVerdict is the outcome of one probe run for the fault.
type ProbeVerdict struct {
	// Time is when the verdict was reached.
	Time metav1.Time `json:"time"`
	// Purpose is confirm (before a taint) or recover (before an untaint).
	Purpose string `json:"purpose"`
	// Checks are the probes run.
	// +optional
	Checks []string `json:"checks,omitempty"`
	// Verdict is passed, failed or timed-out.
	Verdict string `json:"verdict"`
	// Message summarises the results.
	// +optional
	Message string `json:"message,omitempty"`
}

// Decision is one decision of the controller on the fault.
type Decision struct {
	// Time is when it was taken.
	Time metav1.Time `json:"time"`
	// Kind is the decision: taint, event, probe, hold, dry-run, untaint, ...
	Kind string `json:"kind"`
	// Message explains it.
	// +optional
	Message string `json:"message,omitempty"`
}

// NodeFaultList is a list of NodeFaults.
//
// +kubebuilder:object:root=true
type NodeFaultList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeFault `json:"items"`
}

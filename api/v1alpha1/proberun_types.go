package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProbeRunPhase is where a probe run stands.
//
// +kubebuilder:validation:Enum=Pending;Running;Completed;Refused
type ProbeRunPhase string

// Phases of a ProbeRun.
const (
	// ProbeRunPending: not started yet (no leader has taken it, or the manual-run
	// slots are taken: see the Accepted condition).
	ProbeRunPending ProbeRunPhase = "Pending"
	// ProbeRunRunning: its checks run on its nodes; results arrive node by node.
	ProbeRunRunning ProbeRunPhase = "Running"
	// ProbeRunCompleted: every node has its results (status.verdict says how it went).
	ProbeRunCompleted ProbeRunPhase = "Completed"
	// ProbeRunRefused: nothing ran; the Accepted condition says why (unknown check,
	// invalid parameter, a node without a probe agent, probes off).
	ProbeRunRefused ProbeRunPhase = "Refused"
)

// Condition types and reasons of a ProbeRun.
const (
	// ProbeRunAccepted: the controller validated the run and started it (True), or
	// refused it or makes it wait (False).
	ProbeRunAccepted = "Accepted"
	// ProbeRunComplete: every node of the run has its results.
	ProbeRunComplete = "Complete"

	ReasonStarted         = "Started"
	ReasonResumed         = "Resumed"
	ReasonInvalidSpec     = "InvalidSpec"
	ReasonNoProbeAgent    = "NoProbeAgent"
	ReasonNoMatchingNodes = "NoMatchingNodes"
	ReasonProbesOff       = "ProbesNotConfigured"
	ReasonWaitingForSlot  = "WaitingForSlot"
	ReasonAllNodesDone    = "AllNodesDone"
	ReasonNotStarted      = "NotStarted"
	ReasonNodesRunning    = "NodesRunning"
)

// ProbeRun asks the controller to run probe checks on nodes, and records what they
// found. It is cluster-scoped, like the Nodes it targets and like NodeFault: a run
// belongs to no namespace (a node is in none), so who may run probes is granted by
// a ClusterRole on proberuns alone, and one `kubectl get proberuns` shows every run.
// Its spec cannot change once created; the leading controller runs it and writes
// its status, and a new leader finishes a run the previous one left unfinished.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pr,categories=faultline
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Trigger",type=string,JSONPath=`.spec.trigger`
// +kubebuilder:printcolumn:name="Checks",type=string,JSONPath=`.status.checks`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodeCount`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.verdict`
// +kubebuilder:printcolumn:name="Passed",type=integer,JSONPath=`.status.passed`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Force",type=boolean,JSONPath=`.spec.force`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProbeRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProbeRunSpec   `json:"spec"`
	Status ProbeRunStatus `json:"status,omitempty"`
}

// ProbeRunSpec is what to run where. It is immutable: a run is a record of what was
// asked for.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
// +kubebuilder:validation:XValidation:rule="!(has(self.nodes) && has(self.nodeSelector))",message="give nodes or nodeSelector, not both"
type ProbeRunSpec struct {
	// Nodes to probe, by name.
	// +optional
	// +kubebuilder:validation:MaxItems=5000
	// +kubebuilder:validation:items:MaxLength=253
	Nodes []string `json:"nodes,omitempty"`
	// NodeSelector picks the nodes to probe by label; resolved once, when the run
	// starts.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Checks to run on each node (nvml, pciebw, dgemm, dcgm, iperf3, ping,
	// gpu-reset; pvc runs once, in the controller).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Checks []string `json:"checks"`
	// Params are the checks' parameters, by check then parameter name.
	// +optional
	Params map[string]map[string]string `json:"params,omitempty"`
	// Force runs invasive checks even while pods hold the node's GPUs; it needs
	// the permission create on proberuns/force (an admission policy checks it).
	// +optional
	Force bool `json:"force,omitempty"`
	// Batch is how many nodes are probed at once (default: the controller's).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	Batch int32 `json:"batch,omitempty"`
	// Trigger says why the run happened: manual (by hand), or schedule, rule,
	// recovery, escalation, deep for a run the controller started itself. A run
	// the controller started is a record (annotation faultline.io/record): the
	// replica running it writes it, and no controller starts it again.
	// +optional
	// +kubebuilder:default=manual
	// +kubebuilder:validation:Enum=manual;schedule;rule;recovery;escalation;deep
	Trigger string `json:"trigger,omitempty"`
	// Reason says more about the trigger: the rule (pack/rule), the schedule.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
}

// AnnotationRecord marks a ProbeRun that records a run the controller started
// itself (a rule's confirmation, a recovery, a scheduled round...); its
// value is the replica that runs it and alone writes its status. The leader's
// reconciler never starts such a run; it only deletes it after its retention.
const AnnotationRecord = "faultline.io/record"

// MaxRecordResults bounds one record: at most this many results (nodes × checks;
// one node at least). A run over more nodes (a scheduled round over the fleet) is
// recorded in several ProbeRuns, so that none nears etcd's limit on an object
// (1.5 MiB): a check's result on a node, eight GPUs each with their values and
// messages, stays under 7 KiB.
const MaxRecordResults = 100

// ProbeRunStatus is what the run found, written by the leading controller.
type ProbeRunStatus struct {
	// ObservedGeneration is the generation of the spec the status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is where the run stands.
	// +optional
	Phase ProbeRunPhase `json:"phase,omitempty"`
	// Verdict is the worst result over the nodes (pass, warn, fail, error), once
	// the run is Completed.
	// +optional
	Verdict string `json:"verdict,omitempty"`
	// Checks are the spec's checks joined by "," (for kubectl get).
	// +optional
	Checks string `json:"checks,omitempty"`
	// NodeCount is the number of nodes the run probes.
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// Passed and Failed count the nodes done whose checks all passed (or warned),
	// and those where a check failed or could not run.
	// +optional
	Passed int32 `json:"passed,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Owner is the controller replica that last wrote the status.
	// +optional
	Owner string `json:"owner,omitempty"`
	// StartTime is when the run started; CompletionTime when its last node ended.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Nodes are the nodes of the run, each with its results once done. Node ""
	// is the cluster's part (checks the controller runs itself, such as pvc).
	// +optional
	Nodes []ProbeRunNode `json:"nodes,omitempty"`
	// Conditions: Accepted and Complete.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProbeRunNode is one node's part of a run.
type ProbeRunNode struct {
	// Node is the node's name; "" for the checks run in the controller.
	Node string `json:"node"`
	// Done is true once the node's checks ended (a new leader runs again only the
	// nodes not done).
	// +optional
	Done bool `json:"done,omitempty"`
	// Verdict is the worst of the node's results.
	// +optional
	Verdict string `json:"verdict,omitempty"`
	// Error says why the node's checks could not run or finish.
	// +optional
	Error string `json:"error,omitempty"`
	// Refused is the probe agent's HTTP status when it refused checks (409: pods
	// hold the node's GPUs, or another invasive check runs there); Pods the pods it
	// named; NotRun the checks it refused while it ran the others.
	// +optional
	Refused int32 `json:"refused,omitempty"`
	// +optional
	Pods []string `json:"pods,omitempty"`
	// +optional
	NotRun []string `json:"notRun,omitempty"`
	// StartTime and CompletionTime of the node's part.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Results, one per check.
	// +optional
	Results []ProbeRunResult `json:"results,omitempty"`
}

// ProbeRunResult is one check's result on one node.
type ProbeRunResult struct {
	Check string `json:"check"`
	// Status is the verdict: pass, warn, fail, error, skipped.
	Status string `json:"status"`
	// +optional
	Message string `json:"message,omitempty"`
	// Values are the node-level measurements (gpu_count, ...), as decimal numbers.
	// +optional
	Values map[string]string `json:"values,omitempty"`
	// Params are the parameters the check ran with, defaults included.
	// +optional
	Params map[string]string `json:"params,omitempty"`
	// Devices are the per-device results (GPUs, peers).
	// +optional
	Devices []ProbeRunDevice `json:"devices,omitempty"`
	// StartTime is when the check started; Duration how long it took.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// ProbeRunDevice is one device's result of a check.
type ProbeRunDevice struct {
	// ID is the GPU index, or the peer's address for network checks.
	ID     string `json:"id"`
	Status string `json:"status"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	Values map[string]string `json:"values,omitempty"`
	// Failed names the tests that failed on the device (dcgm).
	// +optional
	Failed []string `json:"failed,omitempty"`
}

// ProbeRunList is a list of ProbeRuns.
//
// +kubebuilder:object:root=true
type ProbeRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProbeRun `json:"items"`
}

// Finished reports whether the run ended (Completed or Refused).
func (s *ProbeRunStatus) Finished() bool {
	return s.Phase == ProbeRunCompleted || s.Phase == ProbeRunRefused
}

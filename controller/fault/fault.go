// Package fault holds the types that flow between the controller's stages: a Fault
// is a rule that fired on a node, with its evidence; an Evidence is a fault recorded
// on a node (read from its NodeFault record).
package fault

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// Fault is one firing of a rule on a node: the input of the decide stage.
type Fault struct {
	Node     string
	Rule     *rules.Compiled
	Captures map[string]string
	// Count is the number of matches in the rule's window when it fired.
	Count int
	// Evidence holds the log lines behind the firing, oldest first.
	Evidence []logstream.Line
	// Time is the time of the line that fired the rule.
	Time time.Time
}

// Key identifies a fault: one rule of one pack on one node. It is the one key of
// every per-fault map of the controller.
func Key(node, pack, rule string) string { return node + "/" + pack + "/" + rule }

// LastLine summarises the firing for Events and messages: the count of matches and
// the last line of evidence, cut to 300 bytes ("" with no evidence).
func (f Fault) LastLine() string {
	if len(f.Evidence) == 0 {
		return ""
	}
	l := f.Evidence[len(f.Evidence)-1].Text
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return fmt.Sprintf("%d match(es), last: %q", f.Count, l)
}

// Key identifies the fault for idempotence: see the function Key.
func (f Fault) Key() string { return Key(f.Node, f.Rule.Pack, f.Rule.ID) }

// Annotation keys and label names faultline uses on Nodes.
const (
	// AnnotationFaults points people to the NodeFault records of a node's faults
	// (their names, comma-separated). faultline writes it and never reads it: a
	// node's own annotations are not proof of anything.
	AnnotationFaults = "faultline.io/faults"
	// AnnotationLegacyEvidence is where earlier versions kept the evidence and the
	// taint bookkeeping on the Node; faultline removes it when it writes the Node and
	// never trusts it.
	AnnotationLegacyEvidence = "faultline.io/evidence"
	// LabelOptOut: nodes labelled faultline.io/ignore=true are never tainted.
	LabelOptOut = "faultline.io/ignore"
	// ConditionType is the optional node condition faultline sets.
	ConditionType = "FaultlineFault"
)

// Evidence is one fault recorded on a node, as its NodeFault record says.
type Evidence struct {
	Rule     string            `json:"rule"`
	Pack     string            `json:"pack"`
	Severity rules.Severity    `json:"severity"`
	Action   rules.Action      `json:"action"`
	Taint    string            `json:"taint,omitempty"` // key=value:effect
	Captures map[string]string `json:"captures,omitempty"`
	Count    int               `json:"count"`
	Time     time.Time         `json:"time"`
	Lines    []logstream.Line  `json:"lines"`
	// Recover is the rule's recovery policy, as text ("manual", "after 24h", ...).
	Recover string `json:"recover"`
	// BootID is the node's boot id when the fault was recorded (for recover: reboot).
	BootID string `json:"bootID,omitempty"`
	// TaintPlaced is true when faultline put Taint on the node for this fault (its
	// record says so). It is false when an equal or same-key taint was already there
	// (placed by someone else), so removing the fault never removes a taint faultline
	// did not place.
	TaintPlaced bool `json:"taintPlaced,omitempty"`
}

// ID names the fault's rule as pack/rule.
func (e Evidence) ID() string { return e.Pack + "/" + e.Rule }

// EvidenceOf renders a fault as recorded on its node.
func EvidenceOf(f Fault, bootID string) Evidence {
	ev := Evidence{
		Rule: f.Rule.ID, Pack: f.Rule.Pack, Severity: f.Rule.Severity, Action: f.Rule.Action,
		Captures: f.Captures, Count: f.Count, Time: f.Time, Lines: f.Evidence,
		Recover: f.Rule.Recover.String(), BootID: bootID,
	}
	if f.Rule.Action == rules.ActionTaint || f.Rule.Action == rules.ActionProbe {
		t := f.Rule.Taint
		ev.Taint = t.Key + "=" + t.Value + ":" + t.Effect
	}
	return ev
}

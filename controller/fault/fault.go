// Package fault holds the types that flow between the controller's stages: a Fault
// is a rule that fired on a node, with its evidence; the annotation format puts that
// evidence on the Node for people and tools to read.
package fault

import (
	"encoding/json"
	"fmt"
	"strings"
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

// Key identifies the fault for idempotence: see the function Key.
func (f Fault) Key() string { return Key(f.Node, f.Rule.Pack, f.Rule.ID) }

// Annotation keys and label names faultline uses on Nodes.
const (
	// AnnotationEvidence holds a JSON array of Evidence, one per active fault.
	AnnotationEvidence = "faultline.io/evidence"
	// LabelOptOut: nodes labelled faultline.io/ignore=true are never tainted.
	LabelOptOut = "faultline.io/ignore"
	// ConditionType is the optional node condition faultline sets.
	ConditionType = "FaultlineFault"
)

// Evidence is what the annotation records for one fault.
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
	// TaintPlaced is true when faultline put Taint on the node for this fault. It is
	// false when an equal or same-key taint was already there (placed by someone
	// else), so removing the fault never removes a taint faultline did not place.
	TaintPlaced bool `json:"taintPlaced,omitempty"`
}

// ID names the fault's rule as pack/rule: the key of its entry in the annotation.
func (e Evidence) ID() string { return e.Pack + "/" + e.Rule }

// ParseEvidence reads the AnnotationEvidence value of a Node; an empty value is no
// evidence.
func ParseEvidence(s string) ([]Evidence, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var evs []Evidence
	if err := json.Unmarshal([]byte(s), &evs); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationEvidence, err)
	}
	return evs, nil
}

// EvidenceOf renders a fault for the annotation.
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

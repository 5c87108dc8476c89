// Package fault holds the types that flow between the controller's stages: a Fault
// is a rule that fired on a node, with its evidence. A fault recorded on a node is
// its NodeFault record (api/v1alpha1), read as it is.
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

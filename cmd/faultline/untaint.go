package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/faultline-dev/faultline/controller/act"
)

// untaintOutput is what untaint reports, the same whether the controller or the
// command itself wrote the Node.
type untaintOutput struct {
	Node string `json:"node"`
	// Rule is the --rule asked for, "*" for all of faultline's faults.
	Rule string `json:"rule"`
	// RemovedTaints are the taints taken off the node, as key=value:effect.
	RemovedTaints []string `json:"removedTaints"`
	// ResolvedFaults are the pack/rule of the fault records resolved.
	ResolvedFaults []string `json:"resolvedFaults"`
}

func newUntaintOutput(node, rule string, r act.Result) untaintOutput {
	// Empty lists rather than null, so that scripts can always iterate.
	return untaintOutput{Node: node, Rule: rule,
		RemovedTaints: append([]string{}, r.Removed...), ResolvedFaults: append([]string{}, r.Cleared...)}
}

func (u untaintOutput) writeText(w io.Writer) error {
	if len(u.RemovedTaints) == 0 && len(u.ResolvedFaults) == 0 {
		what := "no fault of faultline's"
		if u.Rule != act.AllRules {
			what = "no fault matching " + u.Rule
		}
		_, err := fmt.Fprintf(w, "node %s: %s recorded, nothing removed\n", u.Node, what)
		return err
	}
	_, err := fmt.Fprintf(w, "node %s: removed %s, resolved %s\n", u.Node,
		countList(len(u.RemovedTaints), "taint", u.RemovedTaints), countList(len(u.ResolvedFaults), "fault record", u.ResolvedFaults))
	return err
}

// countList says "2 taints (a, b)", "1 taint (a)" or "0 taints".
func countList(n int, noun string, items []string) string {
	s := fmt.Sprintf("%d %s", n, noun)
	if n != 1 {
		s += "s"
	}
	if n > 0 {
		s += " (" + strings.Join(items, ", ") + ")"
	}
	return s
}

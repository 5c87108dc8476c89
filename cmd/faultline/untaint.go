package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/act"
)

// writeUntaintText says what an untaint did in one sentence, the same whether the
// controller or the command itself wrote the Node.
func writeUntaintText(w io.Writer, u controller.UntaintResponse) error {
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

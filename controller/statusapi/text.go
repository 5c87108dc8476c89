package statusapi

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// verdicts are Autopilot's words for a result's status.
var verdicts = map[string]string{"pass": "SUCCESS", "warn": "WARNING", "fail": "FAIL", "error": "ERROR", "skipped": "SKIPPED"}

// WriteText renders a finished run the way Autopilot's /status answers: per node,
// one line per check with its verdict, then the node's status.
func WriteText(w io.Writer, pr *v1alpha1.ProbeRun) {
	st := pr.Status
	fmt.Fprintf(w, "Run %s: checks %s on %d node(s), %s\n", pr.Name, strings.Join(pr.Spec.Checks, ","), len(st.Nodes), st.Verdict)
	nodes := slices.Clone(st.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	for _, nr := range nodes {
		name := nr.Node
		if name == "" {
			name = "(cluster)"
		}
		fmt.Fprintf(w, "\nNode: %s\n", name)
		for _, r := range nr.Results {
			fmt.Fprintf(w, "[[ %s ]] %s", strings.ToUpper(r.Check), verdicts[r.Status])
			if r.Message != "" {
				fmt.Fprintf(w, ": %s", r.Message)
			}
			var d time.Duration
			if r.Duration != nil {
				d = r.Duration.Duration
			}
			fmt.Fprintf(w, " (%s)\n", d.Round(time.Millisecond))
			for _, dev := range r.Devices {
				fmt.Fprintf(w, "    %s %s%s", dev.ID, dev.Status, formatValues(dev.Values))
				if dev.Message != "" {
					fmt.Fprintf(w, " %s", dev.Message)
				}
				fmt.Fprintln(w)
			}
		}
		if nr.Error != "" {
			fmt.Fprintf(w, "[[ ERROR ]] %s\n", nr.Error)
		}
		status := "Ok"
		if nr.Verdict == "fail" || nr.Verdict == "error" {
			status = "Err"
		}
		fmt.Fprintf(w, "Node Status: %s\n", status)
	}
}

// formatValues are a device's values, " key=value" in key order.
func formatValues(v map[string]string) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, v[k])
	}
	return b.String()
}

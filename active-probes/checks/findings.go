package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// finding is one observation inside a device check: a status and what it is about.
type finding struct {
	status probe.Status
	text   string
}

// findings collects observations and folds them into a status and a message.
type findings []finding

func (f *findings) add(s probe.Status, format string, args ...any) {
	*f = append(*f, finding{status: s, text: fmt.Sprintf(format, args...)})
}

// status is the worst finding's status, pass when there is none.
func (f findings) status() probe.Status {
	s := probe.StatusPass
	for _, x := range f {
		s = probe.Worst(s, x.status)
	}
	return s
}

// message joins the findings' texts, the most severe first.
func (f findings) message() string {
	sorted := append(findings(nil), f...)
	sort.SliceStable(sorted, func(i, j int) bool { return moreSevere(sorted[i].status, sorted[j].status) })
	parts := make([]string, 0, len(sorted))
	for _, x := range sorted {
		if x.text != "" {
			parts = append(parts, x.text)
		}
	}
	return strings.Join(parts, "; ")
}

// moreSevere reports whether a is a more severe status than b.
func moreSevere(a, b probe.Status) bool { return a != b && probe.Worst(a, b) == a }

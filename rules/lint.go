package rules

import "fmt"

// Lint returns warnings about compiled rules (a set's, or the part of it a caller
// checks): things that load fine but are likely mistakes or slow.
func Lint(rs []*Compiled) []string {
	var w []string
	for _, r := range rs {
		at := fmt.Sprintf("%s:%d: rule %s", r.File, r.Line, r)
		if r.Literals == nil {
			w = append(w, fmt.Sprintf("%s: no literal of %d+ bytes in its regex; it runs on every line (slow)", at, minLiteralLen))
		}
		if len(r.Tests) == 0 {
			w = append(w, at+": has no inline tests")
		}
		if r.Action == ActionTaint && r.Source == SourcePod && r.Threshold.Count <= 1 {
			w = append(w, at+": taints on a single pod-log line; pod logs are written by applications, prefer event or probe, or a threshold")
		}
		if r.Action == ActionTaint && r.Severity == SeverityInfo {
			w = append(w, at+": taints at severity info")
		}
	}
	return w
}

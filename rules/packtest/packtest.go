// Package packtest runs the inline `tests:` of rule packs, like `promtool test rules`:
// each test feeds its line (or lines) through the engine and the correlator and
// checks what the rule did with the last line.
package packtest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/correlate"
)

// Result is the outcome of one inline test.
type Result struct {
	Rule     *rules.Compiled
	Index    int    // 1-based test number within the rule
	Case     string // what a generated test checked; empty for an inline test
	Failures []string
}

// OK reports whether the test passed.
func (r Result) OK() bool { return len(r.Failures) == 0 }

func (r Result) String() string {
	status := "ok"
	if !r.OK() {
		status = "FAIL"
	}
	name := fmt.Sprintf("test %d", r.Index)
	if r.Case != "" {
		name = r.Case
	}
	s := fmt.Sprintf("%s %s %s (%s:%d)", status, r.Rule, name, r.Rule.File, r.Rule.Line)
	for _, f := range r.Failures {
		s += "\n    " + f
	}
	return s
}

// Run runs every inline test of every enabled rule in the engine's set. Tests run
// against the whole set, so exclusive groups and overrides from other packs count.
func Run(e *rules.Engine) []Result {
	var out []Result
	for _, r := range e.Set().Rules {
		for i, t := range r.Tests {
			out = append(out, runOne(e, r, i+1, t))
		}
	}
	return out
}

func runOne(e *rules.Engine, r *rules.Compiled, idx int, t rules.RuleTest) Result {
	res := Result{Rule: r, Index: idx}
	lines := t.Lines
	if t.Line != "" {
		lines = []string{t.Line}
	}
	src := t.Source
	if src == "" && r.Source != rules.SourceAny {
		src = r.Source
	}
	c := correlate.New()
	key := correlate.Key{Node: "test", Stream: "test"}
	// Lines of a test are one second apart, so windows and durations are testable.
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var last []correlate.Outcome
	var hits []rules.Hit
	for i, text := range lines {
		hits = e.Match(&logstream.Line{Text: text, Source: string(src), Labels: t.Labels}, hits[:0])
		last = c.Observe(key, base.Add(time.Duration(i)*time.Second), text, hits, last[:0])
	}
	var got *correlate.Outcome
	for i := range last {
		if last[i].Rule == r {
			got = &last[i]
		}
	}
	wantMatch := t.Expect.Match == nil || *t.Expect.Match
	switch {
	case !wantMatch && got != nil:
		res.Failures = append(res.Failures, fmt.Sprintf("expected no match, got one (captures %s)", fmtCaps(got.Captures)))
		return res
	case !wantMatch:
		return res
	case got == nil:
		res.Failures = append(res.Failures, "expected a match, got none"+otherRules(last))
		return res
	}
	for k, want := range t.Expect.Captures {
		if have, ok := got.Captures[k]; !ok || have != want {
			res.Failures = append(res.Failures, fmt.Sprintf("capture %s: want %q, got %q", k, want, have))
		}
	}
	if t.Expect.Action != "" && got.Action() != t.Expect.Action {
		res.Failures = append(res.Failures, fmt.Sprintf("action: want %s, got %s (count %d of threshold %d)",
			t.Expect.Action, got.Action(), got.Count, r.Threshold.Count))
	}
	if t.Expect.Evidence > 0 && len(got.Evidence) != t.Expect.Evidence {
		res.Failures = append(res.Failures, fmt.Sprintf("evidence: want %d lines, got %d", t.Expect.Evidence, len(got.Evidence)))
	}
	if t.Expect.Severity != "" && r.Severity != t.Expect.Severity {
		res.Failures = append(res.Failures, fmt.Sprintf("severity: want %s, got %s", t.Expect.Severity, r.Severity))
	}
	return res
}

func otherRules(os []correlate.Outcome) string {
	if len(os) == 0 {
		return ""
	}
	var ids []string
	for _, o := range os {
		ids = append(ids, o.Rule.String())
	}
	return " (matched instead: " + strings.Join(ids, ", ") + ")"
}

func fmtCaps(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %q", k, m[k])
	}
	b.WriteString("}")
	return b.String()
}

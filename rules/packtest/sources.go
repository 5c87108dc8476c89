package packtest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/correlate"
	"github.com/faultline-dev/faultline/rules/logline"
	"github.com/faultline-dev/faultline/rules/printf"
)

// LogPrefix is one way a collector or a person writes a program's line: the text
// before the message, which rules/logline removes.
type LogPrefix struct {
	Name   string
	Prefix string
	// Keep is what logline leaves of the prefix (continuation indentation).
	Keep string
}

// KernelPrefixes are the shapes kernel lines take in the wild.
var KernelPrefixes = []LogPrefix{
	{Name: "bare", Prefix: ""},
	{Name: "dmesg", Prefix: "[  123.456789] "},
	{Name: "dmesg caller", Prefix: "[ 8312.004211][ T1234] "},
	{Name: "dmesg ctime", Prefix: "[Mon Nov 23 19:26:50 2026] "},
	{Name: "kmsg", Prefix: "3,3964,206764307,-;"},
	{Name: "syslog", Prefix: "Nov 23 19:26:50 gpu-node-7 kernel: "},
	{Name: "syslog dmesg", Prefix: "Nov  3 09:01:02 gpu-node-7 kernel: [  123.456789] "},
	{Name: "journal iso", Prefix: "2026-11-23T19:26:50+0000 gpu-node-7 kernel: "},
	{Name: "syslog de", Prefix: "Okt 30 09:49:36 gpu-node-7 kernel: "},
	{Name: "syslog fr", Prefix: "févr. 14 18:48:25 gpu-node-7 kernel: "},
	{Name: "syslog ja", Prefix: "11月 23 19:26:50 gpu-node-7 kernel: "},
	{Name: "kernel tag", Prefix: "kernel: "},
	{Name: "continuation", Prefix: "                           ", Keep: "                           "},
}

// PodPrefixes are the shapes of a training pod's lines.
var PodPrefixes = []LogPrefix{
	{Name: "bare", Prefix: ""},
	{Name: "cri", Prefix: "2026-11-23T19:26:50.123456789Z stderr F "},
	{Name: "cri stdout", Prefix: "2026-11-23T19:26:50.123456789+00:00 stdout F "},
}

// Variants is how many value sets each source format is instantiated with.
const Variants = 2

// RunSources checks every rule's source entries: each format string, instantiated
// with generated values under every log prefix of the rule's source, must reach the
// rule (through logline, the engine and the correlator) with the captures the entry
// lists; each benign source must not fire any rule at warning or above.
func RunSources(e *rules.Engine) []Result {
	var out []Result
	for _, r := range e.Set().Rules {
		for i, s := range r.Sources {
			out = append(out, runSource(e, r, i+1, s, false))
		}
		for i, s := range r.BenignSources {
			out = append(out, runSource(e, r, i+1, s, true))
		}
	}
	return out
}

// NVMLPrefixes: the probe agent ships NVML event lines bare, with no log prefix.
var NVMLPrefixes = []LogPrefix{{Name: "bare", Prefix: ""}}

// ProbePrefixes: the probe agent ships its verdict lines bare too.
var ProbePrefixes = NVMLPrefixes

// prefixesFor picks the shapes a source's lines take: a rule that reads any log
// gets pod prefixes for a program's own output (UCX, NCCL, a CLI's printf), which
// never follows a syslog "kernel:" tag.
func prefixesFor(src rules.Source, call string) []LogPrefix {
	switch {
	case src == rules.SourcePod || src == rules.SourceAny && printf.UserCall(call):
		return PodPrefixes
	case src == rules.SourceNVML:
		return NVMLPrefixes
	case src == rules.SourceProbe:
		return ProbePrefixes
	}
	return KernelPrefixes
}

func runSource(e *rules.Engine, r *rules.Compiled, idx int, s rules.SourceRef, benign bool) Result {
	where := s.Call
	if s.Kind != "" && s.Kind != rules.SourcePrintf {
		where = fmt.Sprintf("%s %s:%d", s.Kind, s.Call, s.Line)
	}
	res := Result{Rule: r, Index: idx, Case: fmt.Sprintf("source %d (%s %s)", idx, s.File, where)}
	if benign {
		res.Case = "benign " + res.Case
	}
	for v := 0; v < Variants; v++ {
		in, err := printf.Message(s.Call, s.Func, s.Prefix, s.File, s.Format, v, s.Args)
		if err != nil {
			res.Failures = append(res.Failures, err.Error())
			return res
		}
		want := map[string]string{}
		for name, tmpl := range s.Captures {
			if want[name], err = printf.Expand(tmpl, in.Values); err != nil {
				res.Failures = append(res.Failures, err.Error())
				return res
			}
		}
		lines := printf.Lines(in.Text)
		// A group rule fires on all its lines: print each companion's line too, on
		// the side of the match its position names ("either" before), in order.
		var before, after []string
		for j, c := range s.CompanionList() {
			cin, err := printf.Message(c.Call, c.Func, c.Prefix, c.File, c.Format, v, c.Args)
			if err != nil {
				res.Failures = append(res.Failures, "companion: "+err.Error())
				return res
			}
			if j < len(r.Companions) && r.Companions[j].Position == "after" {
				after = append(after, printf.Lines(cin.Text)...)
			} else {
				before = append(before, printf.Lines(cin.Text)...)
			}
		}
		lines = append(append(before, lines...), after...)
		for _, lp := range prefixesFor(r.Source, s.Call) {
			if f := checkGenerated(e, r, lines, lp, want, benign); f != "" {
				res.Failures = append(res.Failures, fmt.Sprintf("%s prefix, values %d: %s", lp.Name, v+1, f))
			}
		}
		if !benign {
			res.Failures = append(res.Failures, checkAlone(e, r, s, printf.Lines(in.Text), v)...)
		}
	}
	return res
}

// checkAlone checks each line of a multi-line format on its own, under every
// prefix: a log pipeline or a paste may keep only some lines of a message, and
// each distinctive line must still reach the rule. Lines the source names in
// notAlone are skipped; a notAlone entry past the format's lines is an error.
func checkAlone(e *rules.Engine, r *rules.Compiled, s rules.SourceRef, lines []string, variant int) []string {
	var out []string
	for n := range s.NotAlone {
		if n < 1 || n > len(lines) {
			out = append(out, fmt.Sprintf("notAlone names line %d of a %d-line format", n, len(lines)))
		}
	}
	if len(lines) < 2 {
		return out
	}
	for i, l := range lines {
		if _, skip := s.NotAlone[i+1]; skip {
			continue
		}
		for _, lp := range prefixesFor(r.Source, s.Call) {
			if f := checkGenerated(e, r, []string{l}, lp, nil, false); f != "" {
				out = append(out, fmt.Sprintf("line %d of %d alone, %s prefix, values %d: %s (list it in notAlone with a reason if it is not distinctive)", i+1, len(lines), lp.Name, variant+1, f))
				break
			}
		}
	}
	return out
}

// checkGenerated feeds one generated message, under one prefix, through logline,
// the engine and the correlator, and says what is wrong ("" when nothing is).
func checkGenerated(e *rules.Engine, r *rules.Compiled, lines []string, lp LogPrefix, want map[string]string, benign bool) string {
	c := correlate.New()
	key := correlate.Key{Node: "test", Stream: "test"}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var outs []correlate.Outcome
	var hits []rules.Hit
	var got *correlate.Outcome
	for i, text := range lines {
		raw := lp.Prefix + text
		p := logline.Parse(raw)
		if lp.Prefix == "" {
			// The bare line as a collector with a known stream (CRI, kmsg) hands it
			// over; a program's own time stamp ("[1700000000.123456]" of UCX) may look
			// like a dmesg prefix to logline, which only sees the text.
			p = logline.Parsed{Message: raw}
		}
		if p.Message != lp.Keep+text {
			return fmt.Sprintf("logline does not recognise the prefix of %q (message %q)", raw, p.Message)
		}
		src := rules.Source(p.Origin)
		if src == "" {
			src = r.Source
		}
		hits = e.Match(&logstream.Line{Text: p.Message, Source: string(src)}, hits[:0])
		outs = c.Observe(key, base.Add(time.Duration(i)*time.Second), p.Message, hits, outs[:0])
		for j := range outs {
			o := outs[j]
			if benign {
				if o.Rule.Severity.Rank() >= rules.SeverityWarning.Rank() {
					return fmt.Sprintf("benign line %q matches %s (%s)", raw, o.Rule, o.Rule.Severity)
				}
				continue
			}
			if o.Rule == r {
				got = &o
			}
		}
	}
	if benign {
		return ""
	}
	if got == nil {
		return fmt.Sprintf("no match on %q", lp.Prefix+strings.Join(lines, "\n"+lp.Prefix))
	}
	var bad []string
	for name, w := range want {
		if have := got.Captures[name]; have != w {
			bad = append(bad, fmt.Sprintf("capture %s: want %q, got %q", name, w, have))
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

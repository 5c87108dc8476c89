package lokisource

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// Selectors maps a query name to its LogQL stream selector, for example
// "kernel" -> `{source="kernel"}`. With Loki's OTLP ingestion the labels differ
// (for example `{service_name="dmesg-exporter", source="kernel"}`), so selectors are
// plain configuration strings. The names of the log sources (logstream.Sources) are
// also rule sources: EngineQueries filters each of them with the literals of that
// source's rules only.
type Selectors map[string]string

// DefaultSelectors reads every log source as its writer labels it (the table's
// default selectors).
func DefaultSelectors() Selectors {
	sel := Selectors{}
	for _, s := range logstream.Sources() {
		sel[s.Name] = s.Selector
	}
	return sel
}

// Query is one LogQL log query the Source follows. Its Name identifies its position
// in a Checkpoint, so a query whose filter changes (new rule packs) resumes where it
// was; keep names stable.
type Query struct {
	Name  string
	LogQL string
}

// EngineQueries builds the queries for the rules of an engine. A selector named after a
// log source (logstream.IsSource) is filtered with the literals of the rules that read that
// source (and of rules of any source); other selectors get every rule's literals.
// The name only narrows the filter: an entry's source is read from its stream's
// logstream.LabelSource label.
func EngineQueries(sel Selectors, e *rules.Engine) []Query {
	all, allOK := e.Patterns()
	return queries(sel, func(name string) string {
		lits, ok := all, allOK
		if logstream.IsSource(name) {
			lits, ok = e.Set().Literals(rules.Source(name))
		}
		return LineFilter(lits, ok)
	})
}

// queries returns one query per selector, sorted by name, each with its line filter.
func queries(sel Selectors, filter func(name string) string) []Query {
	names := make([]string, 0, len(sel))
	for n := range sel {
		names = append(names, n)
	}
	slices.Sort(names)
	qs := make([]Query, 0, len(names))
	for _, n := range names {
		qs = append(qs, Query{Name: n, LogQL: strings.TrimSpace(sel[n]) + filter(n)})
	}
	return qs
}

// LineFilter returns the LogQL line filter (with a leading space) that keeps the lines
// containing one of literals, compared case-insensitively, or "" when allLiterals is
// false (some rule has no literal, so every line is a candidate). Literals are
// deduplicated and sorted, and a literal that contains another one is left out (the
// shorter one already selects its lines), so the filter is deterministic. With
// allLiterals true and no literal at all (no rules), the filter matches no line.
//
// The regex is `(?i)` + the alternation of the literals quoted with regexp.QuoteMeta.
// Go's (?i) folds Unicode case, a superset of the engine's ASCII case folding, so no
// candidate line is lost. It is written as a LogQL raw (backtick) string when it
// allows, and as a double-quoted string otherwise.
func LineFilter(literals []string, allLiterals bool) string {
	if !allLiterals {
		return ""
	}
	lits := minimalLiterals(literals)
	if len(lits) == 0 {
		return ` != ""`
	}
	quoted := make([]string, len(lits))
	for i, l := range lits {
		quoted[i] = regexp.QuoteMeta(l)
	}
	return " |~ " + LogQLString("(?i)"+strings.Join(quoted, "|"))
}

// minimalLiterals lower-cases (ASCII, like the engine), deduplicates and sorts
// literals, and drops the empty ones and those containing another literal. Dropping is
// safe under (?i): a text matching the longer literal rune by rune contains one
// matching the shorter.
func minimalLiterals(literals []string) []string {
	set := make([]string, 0, len(literals))
	for _, l := range literals {
		if l = asciiLower(l); l != "" {
			set = append(set, l)
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	// Shorter first, so a literal is only compared with the ones it could contain.
	byLen := slices.Clone(set)
	slices.SortStableFunc(byLen, func(a, b string) int { return len(a) - len(b) })
	var keep []string
	for _, l := range byLen {
		redundant := false
		for _, k := range keep {
			if strings.Contains(l, k) {
				redundant = true
				break
			}
		}
		if !redundant {
			keep = append(keep, l)
		}
	}
	slices.Sort(keep)
	return keep
}

// LogQLString quotes s as a LogQL string: raw when s has only printable characters
// and no backtick, double-quoted with Go escapes otherwise.
func LogQLString(s string) string {
	raw := true
	for _, r := range s {
		if r == '`' || r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			raw = false
			break
		}
	}
	if raw {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

package rules

import "github.com/faultline-dev/faultline/logstream"

// MatchNaive is the reference matcher: every rule's regexes on the line, without
// the prefilter. Match must always return the same hits; tests and benchmarks use it.
// Where a companion's literals start is found here by searching for each.
func (e *Engine) MatchNaive(l *logstream.Line, dst []Hit) []Hit {
	s := e.pool.New().(*scratch)
	for i, r := range e.set.Rules {
		for j, cp := range r.Companions {
			s.at[int(e.compBase[i])+j] = int32(firstIndexFold(l.Text, cp.Literals))
		}
	}
	for i := range e.set.Rules {
		dst = e.eval(i, l, true, 1<<len(e.set.Rules[i].Companions)-1, s, dst)
	}
	return dst
}

// firstIndexFold returns where the first of lits (ASCII case-insensitively) starts
// in text, or -1.
func firstIndexFold(text string, lits []string) int {
	p := -1
	for _, l := range lits {
		if j := indexFold(text, lower(l)); j >= 0 && (p < 0 || j < p) {
			p = j
		}
	}
	return p
}

// ParseFileWhole is ParseFile on the whole text, also when loading for matching:
// the reference the load with the testing values blanked must equal.
func (l Loader) ParseFileWhole(file string, data []byte) ([]*Pack, error) {
	docs, err := parseNodes(data)
	return l.decode(file, data, docs, err)
}

// TestingValuesLeftOut reports whether loading a file for matching decodes it
// without its rules' tests and sources (see blankTestingValues).
func TestingValuesLeftOut(data []byte) bool {
	_, _, ok := withoutTestingValues(data)
	return ok
}

// requiredLiterals, requiredLiteralSets and anchoredAtStart read what parseRegex
// finds of expr, one at a time; an expression that does not parse has no
// literals and counts as anchored.
func requiredLiterals(expr string) []string      { return parsedOrNot(expr).literals }
func requiredLiteralSets(expr string) [][]string { return parsedOrNot(expr).sets }
func anchoredAtStart(expr string) bool           { return parsedOrNot(expr).anchored }

func parsedOrNot(expr string) *regex {
	re, err := parseRegex(expr)
	if err != nil {
		return &regex{anchored: true}
	}
	return re
}

// FiniteStrings and ContainsAny are finiteStrings and containsAny.
func FiniteStrings(expr string) []string       { return finiteStrings(expr) }
func ContainsAny(s string, subs []string) bool { return containsAny(s, subs) }

// FruitlessPrimaries returns the rules (pack/id) whose primary regex runs on the line
// (the prefilter marked the rule, and its other required literals hold) and does not
// match: the regexes a line pays for and gets nothing from.
func (e *Engine) FruitlessPrimaries(l *logstream.Line) []string {
	marked := map[int]bool{}
	e.pre.find(l.Text, func(p int32, _ int) {
		for _, t := range e.targets[p] {
			if t.part == 0 {
				marked[int(t.rule)] = true
			}
		}
	})
	var out []string
	s := e.pool.New().(*scratch)
	for i, r := range e.set.Rules {
		if !marked[i] || !r.accepts(l) || !e.startsRight(i, l.Text) || !e.holds(e.musts[i], l.Text, s) {
			continue
		}
		if _, ok := r.matchPrimary(l.Text); !ok {
			out = append(out, r.String())
		}
	}
	return out
}

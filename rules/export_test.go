package rules

import "github.com/faultline-dev/faultline/logstream"

// MatchNaive is the reference matcher: every rule's regexes on the line, without
// the prefilter. Match must always return the same hits; tests and benchmarks use it.
func (e *Engine) MatchNaive(l *logstream.Line, dst []Hit) []Hit {
	done := make([]bool, len(e.groups))
	for i := range e.set.Rules {
		dst = e.eval(i, l, true, 1<<len(e.set.Rules[i].Companions)-1, done, dst)
	}
	return dst
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

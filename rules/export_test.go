package rules

import (
	"bytes"
	"errors"
	"io"
	"reflect"

	"github.com/faultline-dev/faultline/logstream"

	"gopkg.in/yaml.v3"
)

// MatchNaive is the reference matcher: every rule's regexes on the line, without
// the prefilter. Match must always return the same hits; tests and benchmarks use it.
func (e *Engine) MatchNaive(l *logstream.Line, dst []Hit) []Hit {
	done := make([]bool, len(e.groups))
	for i := range e.set.Rules {
		dst = e.eval(i, l, true, e.set.Rules[i].Companion != nil, done, dst)
	}
	return dst
}

// ParseFileStrict is ParseFile through yaml.v3's strict decoder alone: the
// reference the one-tokenisation path must equal.
func (l Loader) ParseFileStrict(file string, data []byte) ([]*Pack, error) {
	return l.parseFileStrict(file, data)
}

// OneTokenisation reports whether every document of a file decodes from its nodes,
// without the strict decoder's second pass.
func OneTokenisation(file string, data []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return errors.Is(err, io.EOF)
		}
		if !knownFieldsOnly(&doc, reflect.TypeOf(Pack{})) {
			return false
		}
	}
}

// TestingValuesLeftOut reports whether loading a file for matching tokenises it
// without its rules' tests and sources (see blankTestingValues).
func TestingValuesLeftOut(data []byte) bool {
	text, cuts := blankTestingValues(data)
	if cuts == nil {
		return false
	}
	docs, err := parseNodes(text)
	return err == nil && cutsAreRuleKeys(docs, cuts)
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

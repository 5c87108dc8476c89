package packs_test

import (
	"testing"

	"github.com/faultline-dev/faultline/test/packengine"
)

// awaitingSources lists the default rules that cite no format string, each with
// precisely why: a line traced to code that no versioned public file holds, or not
// yet to a file at all (closed programs cite the public reports that quote them).
// The list may only shrink: a listed rule that gains sources, or disappears, fails
// the test.
var awaitingSources = map[string]string{}

// TestDefaultRulesCiteSources fails when a default rule cites no format string of
// the program that prints its lines, unless it is awaiting one above.
func TestDefaultRulesCiteSources(t *testing.T) {
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range e.Set().Rules {
		name := r.String()
		seen[name] = true
		switch {
		case len(r.Sources) == 0 && awaitingSources[name] == "":
			t.Errorf("%s (%s:%d) cites no source: add sources (docs/rules.md)", name, r.File, r.Line)
		case len(r.Sources) > 0 && awaitingSources[name] != "":
			t.Errorf("%s now cites sources: remove it from awaitingSources", name)
		}
	}
	for name := range awaitingSources {
		if !seen[name] {
			t.Errorf("awaitingSources lists %s, which is not a default rule", name)
		}
	}
}

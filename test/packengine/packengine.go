// Package packengine builds the default rule packs' matcher for tests, the way
// `faultline rules test` and the packs' own tests read them (every field, or only
// what matching needs).
package packengine

import (
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

// Engine compiles the default packs, every field included, into a matcher.
func Engine() (*rules.Engine, error) { return engine(packs.Load) }

// Matching compiles the default packs into a matcher, leaving out what only
// testing reads (see packs.LoadForMatching).
func Matching() (*rules.Engine, error) { return engine(packs.LoadForMatching) }

func engine(load func() ([]*rules.Pack, error)) (*rules.Engine, error) {
	ps, err := load()
	if err != nil {
		return nil, err
	}
	return rules.CompileEngine(ps)
}

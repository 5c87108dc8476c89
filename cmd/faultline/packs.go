package main

import (
	"fmt"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

// loadEngine loads packs from dirs (or the embedded defaults when none is given),
// compiles them and builds the matcher. A loader for matching only (scan) leaves
// out the rules' tests and sources; lint and test load everything.
func loadEngine(l rules.Loader, dirs []string) (*rules.Engine, error) {
	if len(dirs) == 0 {
		if l.MatchingOnly {
			return packs.MatchingEngine()
		}
		return packs.Engine()
	}
	ps, err := l.LoadPaths(dirs...)
	if err != nil {
		return nil, err
	}
	set, err := rules.Compile(ps)
	if err != nil {
		return nil, err
	}
	if len(set.Rules) == 0 {
		return nil, fmt.Errorf("no enabled rules in %v", dirs)
	}
	return rules.NewEngine(set), nil
}

package main

import (
	"fmt"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

// loadEngine loads packs from dirs (or the embedded defaults when none is given),
// compiles them and builds the matcher.
func loadEngine(dirs []string) (*rules.Engine, error) {
	if len(dirs) == 0 {
		return packs.Engine()
	}
	ps, err := rules.LoadPaths(dirs...)
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

package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/faultline-dev/faultline/controller/packwatch"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

// packFlags are the rule pack flags of every command: --packs (repeatable),
// --no-default-packs and the taint allowance (--allow-taint-effects,
// --allow-taint-key-prefixes). Every command layers its packs alike: the built-in
// packs first (unless --no-default-packs), then each --packs path in order, a later
// rule overriding an earlier one of the same id (a rule without match patches it).
type packFlags struct {
	paths      []string
	noDefaults bool
	taints     rules.TaintPolicy
}

func (f *packFlags) register(fs *pflag.FlagSet, packsUsage, noDefaultsUsage string) {
	fs.StringArrayVar(&f.paths, "packs", nil, packsUsage)
	fs.BoolVar(&f.noDefaults, "no-default-packs", false, noDefaultsUsage)
	fs.StringSliceVar(&f.taints.Effects, "allow-taint-effects", rules.DefaultTaintEffects(),
		"the effects a pack's taint may have, NoSchedule among them; a pack asking for another does not load. NoExecute evicts every pod of the node at once, PodDisruptionBudgets or not (the chart's controller.taintEffects sets this and its admission policy alike)")
	fs.StringSliceVar(&f.taints.KeyPrefixes, "allow-taint-key-prefixes", nil,
		"key prefixes (a DNS subdomain and /, e.g. example.com/) a pack's taint may have besides "+rules.TaintKeyPrefix+"; a pack asking for another key does not load (the chart's admission policy lets the controller write "+rules.TaintKeyPrefix+" taints only)")
}

// layers is the set the flags name, with more paths after those of --packs (the
// positional packs of rules lint and rules test).
func (f *packFlags) layers(more ...string) packLayers {
	return f.layersOf(!f.noDefaults, append(slices.Clone(f.paths), more...))
}

// layersOf is a set of the flags' taint allowance: the built-in packs when
// defaults, then paths.
func (f *packFlags) layersOf(defaults bool, paths []string) packLayers {
	return packLayers{defaults: defaults, paths: paths, taints: f.taints}
}

// watch is the controller's pack configuration: packwatch layers the same way.
func (f *packFlags) watch(cfg *packwatch.Config) {
	cfg.Defaults, cfg.Dirs, cfg.Taints = !f.noDefaults, f.paths, f.taints
}

// packUse says what a command does with its packs, and so which of them it loads
// with their rules' tests and sources (most of a pack's text).
type packUse int

const (
	// forMatching (scan) leaves the tests and sources out of every pack.
	forMatching packUse = iota
	// forRunning (replay, as the controller) loads the given packs whole and the
	// built-in ones for matching: `make test` checks those.
	forRunning
	// forChecking (rules lint, rules test) loads the given packs whole and the
	// built-in ones for matching, so that only the given packs' tests are in the
	// set; with no pack given, the built-in packs are the ones checked, whole.
	forChecking
	// forCoverage loads every pack whole: the rules' sources say with which values
	// to generate the inventory's messages.
	forCoverage
)

// packLayers is one pack set: the built-in packs (when defaults), then paths,
// loaded with a taint allowance.
type packLayers struct {
	defaults bool
	paths    []string
	taints   rules.TaintPolicy
}

// packSet is a compiled pack set and which of its packs were given.
type packSet struct {
	*rules.Engine
	// given holds the files of the packs given on the command line; of the built-in
	// packs when none was given.
	given map[string]bool
	// givenPacks counts the packs given (documents, not files).
	givenPacks int
}

// load loads, compiles and indexes the set for use.
func (l packLayers) load(use packUse) (packSet, error) {
	if !l.defaults && len(l.paths) == 0 {
		return packSet{}, errors.New("--no-default-packs leaves this set empty: give its directories")
	}
	if err := l.taints.Check(); err != nil {
		return packSet{}, fmt.Errorf("--allow-taint-effects, --allow-taint-key-prefixes: %w", err)
	}
	builtin := rules.Loader{MatchingOnly: use != forCoverage, Checked: true, Taints: l.taints}
	given := rules.Loader{MatchingOnly: use == forMatching, Taints: l.taints}
	checkDefaults := use == forChecking && len(l.paths) == 0
	if checkDefaults {
		builtin = given
	}
	ds, ps, err := packs.Layered(l.defaults, builtin, given, l.paths...)
	if err != nil {
		return packSet{}, err
	}
	all := append(slices.Clip(ds), ps...)
	if checkDefaults {
		ps = ds
	}
	set, err := rules.Compile(all)
	if err != nil {
		return packSet{}, err
	}
	if len(set.Rules) == 0 {
		return packSet{}, fmt.Errorf("no enabled rules in %s", l)
	}
	s := packSet{Engine: rules.NewEngine(set), given: map[string]bool{}, givenPacks: len(ps)}
	for _, p := range ps {
		s.given[p.File] = true
	}
	return s, nil
}

// String names the set: "built-in+DIR+...".
func (l packLayers) String() string {
	var parts []string
	if l.defaults {
		parts = append(parts, "built-in")
	}
	return strings.Join(append(parts, l.paths...), "+")
}

// givenRules are the enabled rules that the given packs define (match included):
// the rules a check of those packs is about. A rule a given pack only patches
// stays its earlier pack's.
func (s packSet) givenRules() []*rules.Compiled {
	var out []*rules.Compiled
	for _, r := range s.Set().Rules {
		if s.given[r.File] {
			out = append(out, r)
		}
	}
	return out
}

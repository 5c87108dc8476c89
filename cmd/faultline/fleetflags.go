package main

import (
	"fmt"
	"math"
	"slices"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/faultline-dev/faultline/controller/decide"
)

// maxFleetLabels bounds --fleet-label: each label is a grouping every firing is
// correlated in.
const maxFleetLabels = 16

// fleetFlags are the fleet correlation flags, shared by the controller and replay
// so that replay groups nodes as the controller does.
type fleetFlags struct {
	off bool
}

func (ff *fleetFlags) register(f *pflag.FlagSet, c *decide.FleetConfig) {
	c.Labels = slices.Clone(decide.DefaultFleetLabels)
	f.StringArrayVar(&c.Labels, "fleet-label", c.Labels, "Node label whose values group nodes for fleet correlation, most specific first (repeatable; replaces the defaults)")
	f.IntVar(&c.MinNodes, "fleet-min-nodes", decide.DefaultFleetMinNodes, "a fleet fault needs at least this many nodes of one group hitting the rules of one pack within --fleet-window")
	f.Float64Var(&c.MinShare, "fleet-min-share", decide.DefaultFleetMinShare, "and at least this share of the group's eligible nodes")
	f.DurationVar(&c.Window, "fleet-window", decide.DefaultFleetWindow, "window of fleet correlation")
	f.Float64Var(&c.GroupBudget, "fleet-group-budget", 0, "most nodes faultline may taint in each group, as a percentage of its eligible nodes (at least 1; 0: no group budget)")
	f.BoolVar(&ff.off, "no-fleet", false, "disable fleet correlation")
}

// apply checks the flags' values, naming the flag and the value of a bad one, and
// turns fleet correlation off for --no-fleet.
func (ff *fleetFlags) apply(c *decide.FleetConfig) error {
	if ff.off {
		c.Labels = nil
		return nil
	}
	if len(c.Labels) > maxFleetLabels {
		return fmt.Errorf("--fleet-label: %d labels, at most %d", len(c.Labels), maxFleetLabels)
	}
	for _, l := range c.Labels {
		if errs := validation.IsQualifiedName(l); len(errs) > 0 {
			return fmt.Errorf("--fleet-label %q: not a label key: %s", l, errs[0])
		}
	}
	switch {
	case c.MinNodes < 2:
		return fmt.Errorf("--fleet-min-nodes %d: must be at least 2 (a fleet fault is about nodes that share a part)", c.MinNodes)
	case !(c.MinShare > 0 && c.MinShare <= 1):
		return fmt.Errorf("--fleet-min-share %v: must be in (0, 1]", c.MinShare)
	case c.Window <= 0:
		return fmt.Errorf("--fleet-window %s: must be positive", c.Window)
	case !(c.GroupBudget == 0 || c.GroupBudget >= 1 && c.GroupBudget <= 100) || math.IsNaN(c.GroupBudget):
		return fmt.Errorf("--fleet-group-budget %v: must be 0 (no group budget) or a percentage in [1, 100]", c.GroupBudget)
	}
	return nil
}

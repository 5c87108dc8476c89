package main

import (
	"slices"

	"github.com/spf13/pflag"

	"github.com/faultline-dev/faultline/controller/decide"
)

// fleetFlags are the controller's fleet correlation flags.
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

func (ff *fleetFlags) apply(c *decide.FleetConfig) {
	if ff.off {
		c.Labels = nil
	}
}

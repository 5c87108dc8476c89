package replay

import (
	"slices"
	"strings"

	"github.com/faultline-dev/faultline/controller/decide"
)

// Side says which pack set a row of a Diff comes from.
type Side string

// Sides.
const (
	OnlyCandidate Side = "candidate"
	OnlyBaseline  Side = "baseline"
	Both          Side = "both"
)

// Row is one (node, rule, outcome, escalation step) of either pack set, with each
// side's action.
type Row struct {
	In        Side     `json:"in"`
	Node      string   `json:"node"`
	Rule      string   `json:"rule"`
	Outcome   Outcome  `json:"outcome"`
	Step      *StepRef `json:"step,omitempty"`
	Candidate *Action  `json:"candidate,omitempty"`
	Baseline  *Action  `json:"baseline,omitempty"`
}

// FleetRow is one fleet fault (group, pack) of either pack set, with each side's.
type FleetRow struct {
	In        Side         `json:"in"`
	Group     decide.Group `json:"group"`
	Family    string       `json:"family"`
	Candidate *FleetFault  `json:"candidate,omitempty"`
	Baseline  *FleetFault  `json:"baseline,omitempty"`
}

// join pairs the items of two sides by key, sorted by side (candidate only,
// baseline only, both), then key.
func join[T any](candidate, baseline []T, key func(*T) string) (keys []string, c, b map[string]*T) {
	c, b = map[string]*T{}, map[string]*T{}
	for i := range candidate {
		c[key(&candidate[i])] = &candidate[i]
	}
	for i := range baseline {
		b[key(&baseline[i])] = &baseline[i]
	}
	for k := range c {
		keys = append(keys, k)
	}
	for k := range b {
		if c[k] == nil {
			keys = append(keys, k)
		}
	}
	side := func(k string) Side { return sideOf(c[k] != nil, b[k] != nil) }
	order := map[Side]int{OnlyCandidate: 0, OnlyBaseline: 1, Both: 2}
	slices.SortFunc(keys, func(x, y string) int {
		if d := order[side(x)] - order[side(y)]; d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	return keys, c, b
}

func sideOf(candidate, baseline bool) Side {
	switch {
	case candidate && baseline:
		return Both
	case candidate:
		return OnlyCandidate
	}
	return OnlyBaseline
}

// Diff joins the actions of two replays by (node, rule, outcome, step), sorted by
// side (candidate only, baseline only, both), then node, rule, outcome and step.
func Diff(candidate, baseline *Result) []Row {
	keys, c, b := join(candidate.Actions, baseline.Actions, (*Action).rowKey)
	out := make([]Row, 0, len(keys))
	for _, k := range keys {
		a := c[k]
		if a == nil {
			a = b[k]
		}
		out = append(out, Row{In: sideOf(c[k] != nil, b[k] != nil), Node: a.Node, Rule: a.Rule, Outcome: a.Outcome, Step: a.Step,
			Candidate: c[k], Baseline: b[k]})
	}
	return out
}

// FleetDiff joins the fleet faults of two replays by group and pack.
func FleetDiff(candidate, baseline *Result) []FleetRow {
	keys, c, b := join(candidate.Fleets, baseline.Fleets, (*FleetFault).rowKey)
	out := make([]FleetRow, 0, len(keys))
	for _, k := range keys {
		f := c[k]
		if f == nil {
			f = b[k]
		}
		out = append(out, FleetRow{In: sideOf(c[k] != nil, b[k] != nil), Group: f.Group, Family: f.Family, Candidate: c[k], Baseline: b[k]})
	}
	return out
}

func (a *Action) rowKey() string     { return a.key() }
func (f *FleetFault) rowKey() string { return f.key() }

// Changed reports whether the diff has a row on one side only.
func Changed(rows []Row) bool {
	return slices.ContainsFunc(rows, func(r Row) bool { return r.In != Both })
}

// FleetsChanged reports whether a fleet fault was raised by one side only, or
// with other members.
func FleetsChanged(rows []FleetRow) bool {
	return slices.ContainsFunc(rows, func(r FleetRow) bool {
		return r.In != Both || !slices.Equal(r.Candidate.Members, r.Baseline.Members)
	})
}

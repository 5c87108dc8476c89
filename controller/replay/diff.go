package replay

import (
	"slices"
	"strings"
)

// Side says which pack set a row of a Diff comes from.
type Side string

// Sides.
const (
	OnlyCandidate Side = "candidate"
	OnlyBaseline  Side = "baseline"
	Both          Side = "both"
)

// Row is one (node, rule, outcome) of either pack set, with each side's action.
type Row struct {
	In        Side    `json:"in"`
	Node      string  `json:"node"`
	Rule      string  `json:"rule"`
	Outcome   Outcome `json:"outcome"`
	Candidate *Action `json:"candidate,omitempty"`
	Baseline  *Action `json:"baseline,omitempty"`
}

// Diff joins the actions of two replays by (node, rule, outcome), sorted by side
// (candidate only, baseline only, both), then node, rule and outcome.
func Diff(candidate, baseline *Result) []Row {
	rows := map[string]*Row{}
	var keys []string
	side := func(res *Result, set func(*Row, *Action)) {
		for i := range res.Actions {
			a := &res.Actions[i]
			k := a.key()
			r, ok := rows[k]
			if !ok {
				r = &Row{Node: a.Node, Rule: a.Rule, Outcome: a.Outcome}
				rows[k] = r
				keys = append(keys, k)
			}
			set(r, a)
		}
	}
	side(candidate, func(r *Row, a *Action) { r.Candidate = a })
	side(baseline, func(r *Row, a *Action) { r.Baseline = a })
	out := make([]Row, 0, len(keys))
	for _, k := range keys {
		r := rows[k]
		switch {
		case r.Candidate != nil && r.Baseline != nil:
			r.In = Both
		case r.Candidate != nil:
			r.In = OnlyCandidate
		default:
			r.In = OnlyBaseline
		}
		out = append(out, *r)
	}
	order := map[Side]int{OnlyCandidate: 0, OnlyBaseline: 1, Both: 2}
	slices.SortFunc(out, func(a, b Row) int {
		if c := order[a.In] - order[b.In]; c != 0 {
			return c
		}
		return strings.Compare(a.Node+"\x00"+a.Rule+"\x00"+string(a.Outcome), b.Node+"\x00"+b.Rule+"\x00"+string(b.Outcome))
	})
	return out
}

// Changed reports whether the diff has a row on one side only.
func Changed(rows []Row) bool {
	return slices.ContainsFunc(rows, func(r Row) bool { return r.In != Both })
}

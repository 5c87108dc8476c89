package decide

import (
	"maps"
	"sort"
	"time"
)

// FleetState is fleet correlation's state, saved beside the read position like
// StormState, for the next leader (RestoreFleet).
type FleetState struct {
	Groups []FleetGroupState `json:"groups"`
}

// FleetGroupState is one group's state for one family.
type FleetGroupState struct {
	Group  Group  `json:"group"`
	Family string `json:"family"`
	// Fires maps the nodes that hit the family within the window to their latest firing.
	Fires     map[string]time.Time `json:"fires,omitempty"`
	Active    bool                 `json:"active,omitempty"`
	Since     time.Time            `json:"since,omitzero"`
	Members   map[string]time.Time `json:"members,omitempty"`
	Verdict   Verdict              `json:"verdict,omitempty"`
	Threshold int                  `json:"threshold,omitempty"`
	// Rules are the rules the members of the fleet fault hit (id →).
	Rules map[string]FleetRule `json:"rules,omitempty"`
}

// State returns the state, sorted by group and family; each group keeps at
// most MaxStormNodes of its newest firings and members.
func (c *FleetCorrelation) State() FleetState {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh(c.now())
	st := FleetState{Groups: []FleetGroupState{}}
	for _, fg := range c.groups {
		st.Groups = append(st.Groups, FleetGroupState{Group: fg.group, Family: fg.family, Fires: newest(fg.fires, MaxStormNodes),
			Active: fg.active, Since: fg.since, Members: newest(fg.members, MaxStormNodes), Verdict: fg.verdict, Threshold: fg.threshold,
			Rules: maps.Clone(fg.rules)})
	}
	sort.Slice(st.Groups, func(i, j int) bool {
		return fleetKey(st.Groups[i].Group, st.Groups[i].Family) < fleetKey(st.Groups[j].Group, st.Groups[j].Family)
	})
	return st
}

// Trim leaves out the firings of the groups without a fleet fault, for a state too
// large to save whole: the fleet faults, their members and verdicts are kept.
func (st FleetState) Trim() FleetState {
	out := FleetState{Groups: []FleetGroupState{}}
	for _, g := range st.Groups {
		if g.Active {
			g.Fires = nil
			out.Groups = append(out.Groups, g)
		}
	}
	return out
}

func newest(m map[string]time.Time, limit int) map[string]time.Time {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if !m[keys[i]].Equal(m[keys[j]]) {
			return m[keys[i]].After(m[keys[j]])
		}
		return keys[i] < keys[j]
	})
	out := make(map[string]time.Time, min(len(keys), limit))
	for _, k := range keys[:min(len(keys), limit)] {
		out[k] = m[k]
	}
	return out
}

// Restore takes over the state a previous leader saved: its fleet faults keep
// holding (or keep their verdict), and firings within the window still count. A
// group with a state of its own here is left as it is. It returns the pending fleet
// faults after the restore, as "label=value/family".
func (c *FleetCorrelation) Restore(st FleetState) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cfg.Fleet.Labels) == 0 {
		return nil
	}
	for _, s := range st.Groups {
		k := fleetKey(s.Group, s.Family)
		if _, ok := c.groups[k]; ok || s.Group.Label == "" || s.Family == "" || len(c.groups) >= MaxFleetGroups {
			continue
		}
		fg := &fleetGroup{group: s.Group, family: s.Family, fires: newest(s.Fires, MaxStormNodes), active: s.Active,
			since: s.Since, verdict: s.Verdict, threshold: s.Threshold}
		if fg.fires == nil {
			fg.fires = map[string]time.Time{}
		}
		if s.Active {
			fg.members = newest(s.Members, MaxStormNodes)
			if fg.members == nil {
				fg.members = map[string]time.Time{}
			}
			fg.rules = maps.Clone(s.Rules)
		}
		c.groups[k] = fg
	}
	c.refresh(c.now())
	var out []string
	for _, fg := range c.groups {
		if fg.holding() {
			out = append(out, fg.group.String()+"/"+fg.family)
		}
	}
	sort.Strings(out)
	return out
}

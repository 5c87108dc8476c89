package rules

import "time"

// Rule returns the enabled rule id of pack, or nil when the set has none (a reload
// removed or disabled it).
func (s *Set) Rule(pack, id string) *Compiled {
	for _, r := range s.Rules {
		if r.Pack == pack && r.ID == id {
			return r
		}
	}
	return nil
}

// Horizon is the longest time any rule of the set looks back: its threshold window,
// cooldown or companion duration. Correlation state older than that cannot complete
// any rule and may be forgotten.
func (s *Set) Horizon() time.Duration {
	var h time.Duration
	for _, r := range s.Rules {
		h = max(h, r.Threshold.Window.D(), r.Cooldown)
		for _, cp := range r.Companions {
			h = max(h, cp.Duration)
		}
	}
	return h
}

// Literals returns the lower-cased literals of the rules (and of each of their
// companion regexes) that read lines of source, rules of any source included, and whether
// every such regex has literals (if not, some regex must see every line of that
// source). An empty source means every rule, as Engine.Patterns.
func (s *Set) Literals(source Source) ([]string, bool) {
	var lits []string
	all := true
	add := func(l []string) {
		if l == nil {
			all = false
			return
		}
		for _, v := range l {
			lits = append(lits, lower(v))
		}
	}
	for _, r := range s.Rules {
		if source != "" && r.Source != source && r.Source != SourceAny && r.Source != "" {
			continue
		}
		add(r.Literals)
		for _, cp := range r.Companions {
			add(cp.Literals)
		}
	}
	return lits, all
}

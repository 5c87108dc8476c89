package decide

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// storm tracks one rule's firings across nodes.
//
// A rule is in a storm from the firing that brings the number of distinct nodes it
// fired on within the last StormWindow to the threshold (more than StormShare of the
// eligible nodes, and at least StormMinNodes). The storm ends once that count has
// stayed below the threshold for a whole StormWindow: aboveUntil is the time the
// count drops below the threshold if no node fires again, so the storm ends at
// aboveUntil + StormWindow. An operator may release it earlier (StormHold.Release); the
// release lasts until the storm would have ended on its own, so the same wave of
// firings does not trigger it again.
type storm struct {
	fires      map[string]time.Time // node -> latest firing within the window
	active     bool
	released   bool
	since      time.Time
	aboveUntil time.Time
	window     time.Duration
	peak       int // most nodes within a window during this storm
	threshold  int
}

// holding reports whether the storm holds the rule's faults (nil-safe).
func (s *storm) holding() bool { return s != nil && s.active && !s.released }

func (s *storm) until() time.Time { return s.aboveUntil.Add(s.window) }

func (s *storm) describe(key string) string {
	return fmt.Sprintf("storm: rule %s fired on %d nodes within %s (threshold %d) since %s; held until %s or an operator releases it",
		key, s.peak, s.window, s.threshold, s.since.Format(time.RFC3339), s.until().Format(time.RFC3339))
}

// StormHold holds the faults of a rule that fires on a large share of the fleet at
// once (a storm: a bad driver rollout, a log flood, not many sick nodes). Its
// exported methods are the operator's view and the leader's hand-over; the
// Decider calls the others under its lock, which StormHold shares.
type StormHold struct {
	mu     *sync.Mutex
	now    func() time.Time
	cfg    *Config
	held   *heldQueue
	st     *counters
	storms map[string]*storm // rule key → its firings and storm
}

// get returns the storm state of rule key (nil: none).
func (h *StormHold) get(key string) *storm { return h.storms[key] }

// threshold is the number of distinct nodes that makes a storm among eligible.
func (h *StormHold) threshold(eligible int) int {
	k := int(math.Floor(h.cfg.StormShare*float64(max(eligible, 0))+eps)) + 1
	return max(k, h.cfg.StormMinNodes)
}

// observe records that rule key fired on node at now.
func (h *StormHold) observe(key, node string, now time.Time, eligible int) {
	if h.cfg.DisableStorm {
		return
	}
	s := h.storms[key]
	if s == nil {
		s = &storm{fires: map[string]time.Time{}, window: h.cfg.StormWindow}
		h.storms[key] = s
	}
	s.fires[node] = now
	s.prune(now)
	n, k := len(s.fires), h.threshold(eligible)
	if n < k {
		return
	}
	times := make([]time.Time, 0, n)
	for _, t := range s.fires {
		times = append(times, t)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	// Without new firings the count stays >= k until the (n-k+1)-th oldest expires.
	if t := times[n-k].Add(s.window); t.After(s.aboveUntil) {
		s.aboveUntil = t
	}
	s.peak, s.threshold = max(s.peak, n), k
	if s.active {
		return
	}
	s.active, s.since, s.peak = true, now, n
	h.st.stormsStarted++
	// Faults of the rule already waiting for budget now wait for the storm; those
	// a fleet fault holds stay its own (one brake reports one incident).
	for _, e := range h.held.entries {
		if e.fault.Rule != nil && e.fault.Rule.String() == key && e.reason != ReasonOptedOut && e.reason != ReasonFleet {
			e.reason, e.message = ReasonStorm, s.describe(key)
		}
	}
}

// prune forgets firings that left the window (now-window, now].
func (s *storm) prune(now time.Time) {
	for n, t := range s.fires {
		if !t.After(now.Add(-s.window)) {
			delete(s.fires, n)
		}
	}
}

// refresh ends storms whose time is up and forgets idle rules.
func (h *StormHold) refresh(now time.Time) {
	for key, s := range h.storms {
		s.prune(now)
		if s.active && !now.Before(s.until()) {
			s.active, s.released, s.peak = false, false, 0
			h.st.stormsEnded++
		}
		if !s.active && len(s.fires) == 0 {
			delete(h.storms, key)
		}
	}
}

// Active returns the keys of the rules whose faults a storm holds now, sorted.
func (h *StormHold) Active() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refresh(h.now())
	var out []string
	for k, s := range h.storms {
		if s.holding() {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Storm describes a rule in a storm.
type Storm struct {
	Rule string
	// Since is when the storm started; Until when it ends if no node fires again.
	Since time.Time
	Until time.Time
	// Nodes is the number of distinct nodes the rule fired on within the window now;
	// Peak the most seen during the storm; Threshold the count that makes a storm.
	Nodes, Peak, Threshold int
	// Released: an operator released it; its faults go ahead (within budget).
	Released bool
}

// List returns the storms in progress, released ones included, sorted by rule.
func (h *StormHold) List() []Storm {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refresh(h.now())
	var out []Storm
	for k, s := range h.storms {
		if s.active {
			out = append(out, Storm{Rule: k, Since: s.since, Until: s.until(), Nodes: len(s.fires),
				Peak: s.peak, Threshold: s.threshold, Released: s.released})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return out
}

// Release ends the hold of a storm on rule key ("pack/id") by an operator's
// decision; its held faults go ahead at the next Release, within the budgets. It
// reports whether the rule was storm-held.
func (h *StormHold) Release(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refresh(h.now())
	s := h.storms[key]
	if !s.holding() {
		return false
	}
	s.released = true
	h.st.stormsReleased++
	return true
}

// MaxStormNodes bounds the nodes StormState keeps per rule (the newest firings): a
// saved state stays small in a fleet-wide storm, whose end time is kept whole.
const MaxStormNodes = 1024

// StormState is the storm hold's state: what a new leader needs to go on with the
// storms of the previous one (Restore), saved beside the read position.
type StormState struct {
	Rules []RuleStorm `json:"rules"`
}

// RuleStorm is one rule's storm state.
type RuleStorm struct {
	Rule string `json:"rule"` // pack/id
	// Fires maps each node the rule fired on within the window to its latest firing.
	Fires map[string]time.Time `json:"fires,omitempty"`
	// Active: in a storm since Since; it ends at AboveUntil plus the window.
	Active     bool      `json:"active,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	AboveUntil time.Time `json:"aboveUntil,omitzero"`
	Peak       int       `json:"peak,omitempty"`
	Threshold  int       `json:"threshold,omitempty"`
	// Released: an operator released the storm; it stays released until it ends.
	Released bool `json:"released,omitempty"`
}

// Encode renders the state as JSON of at most limit bytes. Over it (many rules in a
// storm on a large fleet at once) the nodes each rule fired on are left out, and
// trimmed says so: the storms, their end times and releases are kept, and only the
// count toward a new storm starts over where the state is restored.
func (st StormState) Encode(limit int) (raw []byte, trimmed bool, err error) {
	raw, err = json.Marshal(st)
	if err != nil || len(raw) <= limit {
		return raw, false, err
	}
	bare := StormState{Rules: make([]RuleStorm, len(st.Rules))}
	for i, r := range st.Rules {
		r.Fires = nil
		bare.Rules[i] = r
	}
	raw, err = json.Marshal(bare)
	return raw, true, err
}

// State returns the storm hold's state, sorted by rule.
func (h *StormHold) State() StormState {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refresh(h.now())
	st := StormState{Rules: []RuleStorm{}}
	for key, s := range h.storms {
		r := RuleStorm{Rule: key, Fires: make(map[string]time.Time, min(len(s.fires), MaxStormNodes)), Active: s.active,
			Since: s.since, AboveUntil: s.aboveUntil, Peak: s.peak, Threshold: s.threshold, Released: s.released}
		nodes := make([]string, 0, len(s.fires))
		for n := range s.fires {
			nodes = append(nodes, n)
		}
		// The newest firings when there are too many.
		sort.Slice(nodes, func(i, j int) bool { return s.fires[nodes[i]].After(s.fires[nodes[j]]) })
		for _, n := range nodes[:min(len(nodes), MaxStormNodes)] {
			r.Fires[n] = s.fires[n]
		}
		st.Rules = append(st.Rules, r)
	}
	sort.Slice(st.Rules, func(i, j int) bool { return st.Rules[i].Rule < st.Rules[j].Rule })
	return st
}

// Restore takes over the storm state a previous leader saved: its storms go
// on (an operator's release with them) until they end as they would have, and the
// firings within the window still count toward a storm. A rule with a state of its
// own here is left as it is. It returns the rules in a storm after the restore.
func (h *StormHold) Restore(st StormState) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cfg.DisableStorm {
		return nil
	}
	for _, r := range st.Rules {
		if _, ok := h.storms[r.Rule]; ok || r.Rule == "" {
			continue
		}
		s := &storm{fires: map[string]time.Time{}, window: h.cfg.StormWindow, active: r.Active, released: r.Released,
			since: r.Since, aboveUntil: r.AboveUntil, peak: r.Peak, threshold: r.Threshold}
		for n, t := range r.Fires {
			if len(s.fires) >= MaxStormNodes {
				break
			}
			s.fires[n] = t
		}
		h.storms[r.Rule] = s
	}
	h.refresh(h.now())
	var out []string
	for k, s := range h.storms {
		if s.active {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

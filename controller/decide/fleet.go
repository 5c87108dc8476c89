package decide

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

// Fleet correlation: nodes that share a part (a rack's switch, an NVLink domain, a
// driver version) fail together. When enough nodes of one group hit the same rule
// family within a window, the shared part is the more likely culprit, so one fleet
// fault is raised for the group and the taints of its member nodes for that family
// are held (ReasonFleet) until an operator gives a verdict: release (the nodes are
// at fault: their taints go ahead, within the budgets) or dismiss (the shared part
// was: the held faults are dropped, no taint).
//
// A rule's family is its pack: a pack groups the rules of one subsystem (Xids,
// NVLink, InfiniBand), which is what a shared part breaks.
//
// Groups are the values of the topology labels (FleetConfig.Labels) among the
// eligible nodes (NodeFacts.Groups). A node is in one group per label; when a
// firing brings several of its groups to the threshold, the smallest group (the
// most specific part: a rack before its zone) gets the fleet fault, and nodes
// already members of a fleet fault of the family do not count toward another.

// ReasonFleet: a fleet fault of the node's group holds the rule family's taints;
// ReasonGroupBudget: the group's own budget (FleetConfig.GroupBudget) is used up.
const (
	ReasonFleet       HoldReason = "fleet"
	ReasonGroupBudget HoldReason = "group-budget"
)

// Fleet defaults.
const (
	DefaultFleetMinNodes = 3
	DefaultFleetMinShare = 0.5
	DefaultFleetWindow   = 10 * time.Minute
	// MaxFleetGroups bounds the groups tracked at once: past it, firings in new
	// groups are not correlated, and counted (FleetCorrelation.Dropped).
	MaxFleetGroups = 4096
)

// DefaultFleetLabels are the topology labels that group nodes by default, most
// specific first: the rack (set by the cluster's provisioning), the NVLink domain
// GPU feature discovery publishes, the driver version it publishes, the zone.
var DefaultFleetLabels = []string{
	"topology.kubernetes.io/rack",
	"nvidia.com/gpu.clique",
	"nvidia.com/cuda.driver-version.full",
	"topology.kubernetes.io/zone",
}

// FleetConfig configures fleet correlation. No Labels: it is off.
type FleetConfig struct {
	// Labels are the Node labels whose values group nodes.
	Labels []string
	// MinNodes: a fleet fault needs at least this many nodes of one group hitting
	// the family within Window (default 3).
	MinNodes int
	// MinShare: and at least this share of the group's eligible nodes (default
	// 0.5), so that a few unrelated faults in a zone of hundreds of nodes stay node
	// faults. 1 asks for every node of the group; use a small value to go by
	// MinNodes alone.
	MinShare float64
	// Window is the sliding window of fleet correlation (default 10m).
	Window time.Duration
	// GroupBudget caps the faultline-tainted nodes of each group to this
	// percentage of the group's eligible nodes (at least 1); 0: no group budget.
	GroupBudget float64
}

func (c *FleetConfig) validate() error {
	if len(c.Labels) == 0 {
		return nil
	}
	if c.MinNodes == 0 {
		c.MinNodes = DefaultFleetMinNodes
	}
	if c.MinNodes < 2 {
		return fmt.Errorf("decide: fleet MinNodes %d is below 2", c.MinNodes)
	}
	if c.MinShare == 0 {
		c.MinShare = DefaultFleetMinShare
	}
	if c.MinShare < 0 || c.MinShare > 1 || math.IsNaN(c.MinShare) {
		return fmt.Errorf("decide: fleet MinShare %v is not in (0, 1]", c.MinShare)
	}
	if c.Window == 0 {
		c.Window = DefaultFleetWindow
	}
	if c.Window < 0 {
		return fmt.Errorf("decide: fleet Window %v is negative", c.Window)
	}
	if c.GroupBudget < 0 || c.GroupBudget > 100 || math.IsNaN(c.GroupBudget) {
		return fmt.Errorf("decide: fleet GroupBudget %v is not in [0, 100]", c.GroupBudget)
	}
	for _, l := range c.Labels {
		if l == "" {
			return fmt.Errorf("decide: empty fleet label")
		}
	}
	c.Labels = slices.Clone(c.Labels)
	return nil
}

// Group is the nodes whose label Label has the value Value.
type Group struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

func (g Group) String() string { return g.Label + "=" + g.Value }

// Verdict is an operator's verdict on a fleet fault.
type Verdict string

// Verdicts ("" while pending).
const (
	VerdictReleased  Verdict = "released"
	VerdictDismissed Verdict = "dismissed"
)

// FleetFault is a fleet fault as the caller sees it.
type FleetFault struct {
	Group  Group
	Family string // the rules' pack
	Since  time.Time
	// Members are the nodes of the group that hit the family since the fleet
	// fault was raised (and within the window before), sorted.
	Members []string
	// Verdict is "" while the members' taints are held.
	Verdict Verdict
	// Threshold is the node count that raised it.
	Threshold int
	// Rules are the ids of the rules of the family the members hit, sorted;
	// Severity the highest of their severities; Mode the highest mode they acted
	// in (a rule below enforce is never correlated, so enforce).
	Rules    []string
	Severity rules.Severity
	Mode     rules.Mode
}

// FleetRule is what a fleet fault knows of one rule its members hit.
type FleetRule struct {
	Severity rules.Severity `json:"severity,omitempty"`
	Mode     rules.Mode     `json:"mode,omitempty"`
}

// Pending reports whether the fleet fault still holds its members' taints.
func (f FleetFault) Pending() bool { return f.Verdict == "" }

// fleetGroup tracks one (group, family).
type fleetGroup struct {
	group     Group
	family    string
	fires     map[string]time.Time // node -> latest firing within the window
	active    bool
	since     time.Time
	members   map[string]time.Time // while active: node -> latest firing
	verdict   Verdict
	threshold int
	// hit: the rules each node of fires hit (pruned with fires); rules: those the
	// members hit while active (id →).
	hit   map[string]map[string]FleetRule
	rules map[string]FleetRule
}

// note records that node hit rule id (and, while active and node is a member,
// adds it to the fleet fault's rules).
func (g *fleetGroup) note(node, id string, r FleetRule) {
	if g.hit == nil {
		g.hit = map[string]map[string]FleetRule{}
	}
	if g.hit[node] == nil {
		g.hit[node] = map[string]FleetRule{}
	}
	g.hit[node][id] = r
	if _, member := g.members[node]; g.active && member {
		if g.rules == nil {
			g.rules = map[string]FleetRule{}
		}
		g.rules[id] = r
	}
}

func fleetKey(g Group, family string) string { return g.Label + "\x00" + g.Value + "\x00" + family }

func (g *fleetGroup) holding() bool { return g != nil && g.active && g.verdict == "" }

func (g *fleetGroup) view() FleetFault {
	m := make([]string, 0, len(g.members))
	for n := range g.members {
		m = append(m, n)
	}
	sort.Strings(m)
	out := FleetFault{Group: g.group, Family: g.family, Since: g.since, Members: m, Verdict: g.verdict, Threshold: g.threshold}
	for id, r := range g.rules {
		out.Rules = append(out.Rules, id)
		if r.Severity.Rank() > out.Severity.Rank() {
			out.Severity = r.Severity
		}
		if out.Mode == "" || r.Mode.Rank() > out.Mode.Rank() {
			out.Mode = r.Mode
		}
	}
	sort.Strings(out.Rules)
	return out
}

func (g *fleetGroup) describe() string {
	return fmt.Sprintf("fleet fault: %d nodes of %s hit pack %s within the window since %s; held until an operator releases or dismisses it",
		len(g.members), g.group, g.family, g.since.Format(time.RFC3339))
}

func (g *fleetGroup) prune(now time.Time, window time.Duration) {
	for n, t := range g.fires {
		if !t.After(now.Add(-window)) {
			delete(g.fires, n)
			delete(g.hit, n)
		}
	}
}

// FleetCorrelation tracks the firings of each rule family by topology group and
// raises fleet faults. Its exported methods are the operator's verdicts and the
// leader's hand-over; the Decider calls the others under its lock, which
// FleetCorrelation shares.
type FleetCorrelation struct {
	mu      *sync.Mutex
	now     func() time.Time
	cfg     *Config
	held    *heldQueue
	st      *counters
	groups  map[string]*fleetGroup // fleetKey → the group's firings and fleet fault
	dropped uint64
}

// groupsOf lists node's groups in label order.
func (c *FleetCorrelation) groupsOf(node string, facts NodeFacts) []Group {
	labels := facts.topologyOf(node)
	var out []Group
	for _, l := range c.cfg.Fleet.Labels {
		if v := labels[l]; v != "" {
			out = append(out, Group{Label: l, Value: v})
		}
	}
	return out
}

// threshold is the node count that raises a fleet fault in a group of size.
func (c *FleetCorrelation) threshold(size int) int {
	k := int(math.Ceil(c.cfg.Fleet.MinShare*float64(size) - eps))
	return max(k, c.cfg.Fleet.MinNodes)
}

// observe records that f's family fired on f.Node, joins the node to the
// pending fleet fault of one of its groups, or raises one.
func (c *FleetCorrelation) observe(f fault.Fault, facts NodeFacts, now time.Time) {
	if len(c.cfg.Fleet.Labels) == 0 {
		return
	}
	family := f.Rule.Pack
	hit := FleetRule{Severity: f.Rule.Severity, Mode: modeOf(f.Rule, c.cfg.MaxMode)}
	groups := c.groupsOf(f.Node, facts)
	for _, g := range groups {
		k := fleetKey(g, family)
		fg := c.groups[k]
		if fg == nil {
			if len(c.groups) >= MaxFleetGroups {
				c.dropped++
				continue
			}
			fg = &fleetGroup{group: g, family: family, fires: map[string]time.Time{}}
			c.groups[k] = fg
		}
		fg.fires[f.Node] = now
		fg.prune(now, c.cfg.Fleet.Window)
		if fg.active {
			fg.members[f.Node] = now
		}
		fg.note(f.Node, f.Rule.ID, hit)
	}
	taken := c.members(family)
	if taken[f.Node] {
		return
	}
	// Raise the smallest group that reached its threshold, counting only nodes
	// that are in no other fleet fault of the family.
	var best *fleetGroup
	bestSize := 0
	for _, g := range groups {
		fg := c.groups[fleetKey(g, family)]
		if fg == nil || fg.active {
			continue
		}
		size := facts.groupSize(g)
		n := 0
		for node := range fg.fires {
			if !taken[node] {
				n++
			}
		}
		if k := c.threshold(size); n >= k && (best == nil || size < bestSize) {
			best, bestSize = fg, size
			best.threshold = k
		}
	}
	if best == nil {
		return
	}
	best.active, best.since, best.verdict = true, now, ""
	best.members, best.rules = map[string]time.Time{}, map[string]FleetRule{}
	for node, t := range best.fires {
		if !taken[node] {
			best.members[node] = t
			for id, r := range best.hit[node] {
				best.rules[id] = r
			}
		}
	}
	// Faults of the members already waiting (for budget) now wait for the verdict.
	for _, e := range c.held.entries {
		if _, member := best.members[e.fault.Node]; member && e.fault.Rule != nil && e.fault.Rule.Pack == family &&
			e.reason != ReasonOptedOut {
			e.reason, e.message = ReasonFleet, best.describe()
		}
	}
}

// members is the set of nodes that are members of an active fleet fault of
// family.
func (c *FleetCorrelation) members(family string) map[string]bool {
	out := map[string]bool{}
	for _, fg := range c.groups {
		if fg.active && fg.family == family {
			for n := range fg.members {
				out[n] = true
			}
		}
	}
	return out
}

// of returns the active fleet fault of family that node is a member of.
func (c *FleetCorrelation) of(node, family string) *fleetGroup {
	var found *fleetGroup
	for _, fg := range c.groups {
		if fg.active && fg.family == family {
			if _, ok := fg.members[node]; ok {
				if found == nil || fleetKey(fg.group, family) < fleetKey(found.group, family) {
					found = fg
				}
			}
		}
	}
	return found
}

// decision decides f when a fleet fault of its node's group has its family:
// held while the fleet fault is pending, dropped once it is dismissed. It changes
// nothing; ok is false when no fleet fault decides f.
func (c *FleetCorrelation) decision(f fault.Fault) (Decision, bool) {
	if len(c.cfg.Fleet.Labels) == 0 {
		return Decision{}, false
	}
	fg := c.of(f.Node, f.Rule.Pack)
	switch {
	case fg.holding():
		return Decision{Kind: KindHold, Reason: ReasonFleet, Fault: f, Message: fg.describe()}, true
	case fg != nil && fg.verdict == VerdictDismissed:
		return Decision{Kind: KindNone, Fault: f, Message: fmt.Sprintf(
			"the fleet fault of %s on pack %s was dismissed by an operator: the shared part is blamed, not the node",
			fg.group, fg.family)}, true
	}
	return Decision{}, false
}

// groupBudgetHold holds a taint that would take a group over its budget.
func (c *FleetCorrelation) groupBudgetHold(f fault.Fault, facts NodeFacts, used map[string]bool) (Decision, bool) {
	pct := c.cfg.Fleet.GroupBudget
	if pct <= 0 || used[f.Node] {
		return Decision{}, false
	}
	for _, g := range c.groupsOf(f.Node, facts) {
		size := facts.groupSize(g)
		lim := max(int(math.Floor(pct*float64(size)/100+eps)), 1)
		n := 0
		for node := range used {
			if facts.topologyOf(node)[g.Label] == g.Value {
				n++
			}
		}
		if n >= lim {
			return Decision{Kind: KindHold, Reason: ReasonGroupBudget, Fault: f,
				Message: fmt.Sprintf("group budget of %s exhausted: %d of %d nodes tainted by faultline (%g%% of %d eligible nodes)",
					g, n, lim, pct, size)}, true
		}
	}
	return Decision{}, false
}

// refresh forgets groups with no firing within the window, except fleet
// faults waiting for a verdict: those stay until an operator gives one. In
// dry-run none waits (nothing is held), so they go when their group is quiet.
func (c *FleetCorrelation) refresh(now time.Time) {
	for k, fg := range c.groups {
		fg.prune(now, c.cfg.Fleet.Window)
		if len(fg.fires) == 0 && (!fg.holding() || c.cfg.DryRun) {
			delete(c.groups, k)
		}
	}
}

// Faults returns the fleet faults, those with a verdict included until their
// group is quiet for a window, sorted by group and family.
func (c *FleetCorrelation) Faults() []FleetFault {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh(c.now())
	var out []FleetFault
	for _, fg := range c.groups {
		if fg.active {
			out = append(out, fg.view())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return fleetKey(out[i].Group, out[i].Family) < fleetKey(out[j].Group, out[j].Family)
	})
	return out
}

// Dropped counts the firings not correlated because MaxFleetGroups groups
// were tracked already.
func (c *FleetCorrelation) Dropped() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Release gives the verdict "the nodes are at fault" on the pending fleet
// fault of group and family: its members' held faults go ahead at the next Release,
// within the budgets, and later firings of the members are node faults again. It
// reports whether such a fleet fault was pending.
func (c *FleetCorrelation) Release(g Group, family string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fg := c.groups[fleetKey(g, family)]
	if !fg.holding() {
		return false
	}
	fg.verdict = VerdictReleased
	return true
}

// Dismiss gives the verdict "the shared part was at fault" on the pending
// fleet fault of group and family: the held faults of its members for the family
// are dropped without a taint and returned (the caller resolves their records).
// Firings of the members within the window after are dropped too (decided
// KindNone), until the group is quiet for a window. ok is false when no such
// fleet fault was pending.
func (c *FleetCorrelation) Dismiss(g Group, family string) (dropped []HeldFault, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fg := c.groups[fleetKey(g, family)]
	if !fg.holding() {
		return nil, false
	}
	fg.verdict = VerdictDismissed
	for _, e := range slices.Clone(c.held.entries) {
		if e.reason == ReasonFleet && e.fault.Rule != nil && e.fault.Rule.Pack == family {
			if _, member := fg.members[e.fault.Node]; member {
				c.held.remove(e.key)
				c.st.heldForgotten++
				dropped = append(dropped, HeldFault{Fault: e.fault, Reason: e.reason, Message: e.message,
					Since: e.since, Updated: e.updated, Hits: e.hits, ProbeFailed: e.probeFailed})
			}
		}
	}
	return dropped, true
}

// Package decide says what to do with each fault, safely: taint the node, post an
// Event, run a probe, or hold the fault back because tainting it now would take too
// much of the fleet out of scheduling.
//
// Three brakes stand between a fired rule and a taint:
//
//   - a global budget of nodes faultline may keep tainted: the stricter of an
//     absolute cap (Config.MaxNodes) and a share of the eligible nodes
//     (Config.MaxPercent). The budget counts nodes, not taints: a node faultline
//     already tainted takes another rule's taint without using more budget.
//   - optional per-rule budgets (Config.RuleBudgets, "pack/id" -> max nodes).
//   - a storm hold: when one rule fires on more than Config.StormShare of the
//     eligible nodes (and at least Config.StormMinNodes) within Config.StormWindow,
//     the rule is more likely broken (or a driver rollout is under way) than the
//     nodes, so its faults are held until the storm passes or an operator releases it.
//
// Held faults are never dropped silently: they wait in a bounded queue (Held) and
// Release hands them back, oldest first, once they can be applied.
//
// Before any brake, a rule's mode (rules.Mode, lowered to Config.MaxMode) says how
// far it may act: a rule in mode observe is only counted (KindObserve), one in mode
// annotate is recorded without a taint or a probe (KindAnnotate), and only a rule in
// mode enforce takes its action. Faults below enforce take no capacity, so they use
// no budget and count toward no storm.
//
// Recoveries never pass through these brakes: Recoverable applies a rule's recovery
// policy and consults neither the budget nor the storm state, so a storm or an
// exhausted budget never keeps a healed node tainted.
//
// The package is pure logic: the caller reads the cluster (NodeFacts) and acts on
// the decisions. Cooldowns are applied upstream, by the correlator. The caller:
//
//   - calls Decide for each fired fault and applies the decision (DecideProbe
//     after the probes of a KindProbe decision; NotApplied when a taint fails);
//   - calls Untainted after removing taints, then Release, and Release periodically,
//     applying what it returns;
//   - asks Recoverable about each active fault and untaints when it says so.
//
// The caller's view of the nodes may lag behind its own actions (an informer
// cache): a taint decided here counts against the budgets for Config.PendingTTL
// whether or not the facts show it yet, so the facts need not be fresh, only less
// stale than PendingTTL and never older than facts given before.
package decide

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

// Kind is what a decision asks the caller to do. Its values are usable as metric
// label values.
type Kind string

// Decision kinds.
const (
	// KindNone: nothing to do (an info/none rule, a passing probe).
	KindNone Kind = "none"
	// KindTaint: taint the node with the rule's taint and record the evidence.
	KindTaint Kind = "taint"
	// KindEvent: post an Event (event rules are never held).
	KindEvent Kind = "event"
	// KindProbe: run the rule's probes on the node, then call DecideProbe.
	KindProbe Kind = "probe"
	// KindHold: the fault is held back (see Reason) and kept in the Held queue.
	KindHold Kind = "hold"
	// KindAlreadyTainted: the node already carries this rule's taint.
	KindAlreadyTainted Kind = "already-tainted"
	// KindDryRun: dry-run mode; Of says what would have been done.
	KindDryRun Kind = "dry-run"
	// KindObserve: the rule is in mode observe: count and log the firing, write
	// nothing to the cluster.
	KindObserve Kind = "observe"
	// KindAnnotate: the rule is in mode annotate: record the fault (NodeFault,
	// Event), take no capacity (no taint, no probe).
	KindAnnotate Kind = "annotate"
)

// HoldReason says why a fault is held.
type HoldReason string

// Hold reasons.
const (
	ReasonBudget     HoldReason = "budget"
	ReasonRuleBudget HoldReason = "rule-budget"
	ReasonStorm      HoldReason = "storm"
	ReasonOptedOut   HoldReason = "opted-out"
)

// Decision is what to do with one fault.
type Decision struct {
	Kind Kind
	// Of is, for KindDryRun, the kind that would have been decided.
	Of Kind
	// Reason is set for KindHold, and for KindDryRun of a hold.
	Reason HoldReason
	// Fault is the fault decided on (with the latest evidence for released faults).
	Fault fault.Fault
	// Mode is the mode the fault's rule acted in: its own, lowered to
	// Config.MaxMode ("" for a fault without a rule).
	Mode rules.Mode
	// Message explains the decision for logs and Events.
	Message string
	// Step is, for KindEscalate (and its holds and dry-runs), the escalation step.
	Step *Step
	// Unconfirmed marks a KindTaint or KindAlreadyTainted whose taint is the
	// unconfirmed one (the rule's key, the value v1alpha1.UnconfirmedTaintValue): the
	// harmless checks of its confirming probe found nothing and the invasive ones
	// wait for the node's GPUs. It climbs no ladder.
	Unconfirmed bool
}

// Effective is the kind of the decision, looking through dry-run.
func (d Decision) Effective() Kind {
	if d.Kind == KindDryRun {
		return d.Of
	}
	return d.Kind
}

// String renders the decision for logs.
func (d Decision) String() string {
	s := string(d.Kind)
	if d.Kind == KindDryRun {
		s += "(" + string(d.Of) + ")"
	}
	if d.Reason != "" {
		s += "(" + string(d.Reason) + ")"
	}
	if d.Fault.Rule != nil {
		s += " " + d.Fault.Key()
	}
	if d.Message != "" {
		s += ": " + d.Message
	}
	return s
}

// NodeFacts is what the caller knows about the cluster when it asks for a decision.
// The maps are read, never modified or retained.
type NodeFacts struct {
	// Eligible is the number of nodes faultline may taint (the base of MaxPercent
	// and StormShare), typically the GPU nodes it watches minus opted-out ones.
	Eligible int
	// Tainted maps each node that currently carries a faultline taint to the keys
	// ("pack/id") of the rules whose taints it carries. A node present with an empty
	// list still counts as faultline-tainted for the global budget.
	Tainted map[string][]string
	// OptedOut holds the nodes labelled fault.LabelOptOut=true.
	OptedOut map[string]bool
	// Groups holds the eligible nodes' values of the topology labels
	// (Config.Fleet.Labels): fleet correlation's groups. Nil: no node is grouped.
	// It is an index (act.FactIndex, kept by the controller's Node informer and
	// filled from the node list by a replay), so a decision never passes over the
	// nodes.
	Groups TopologyIndex
}

// TopologyIndex is an index of the eligible nodes' topology label values. Its
// methods may be called concurrently with updates of the index.
type TopologyIndex interface {
	// Labels returns node's topology values (nil: none, or the node is not
	// eligible). The map is read-only.
	Labels(node string) map[string]string
	// Size counts the eligible nodes of g.
	Size(g Group) int
}

// topologyOf returns node's topology values.
func (f NodeFacts) topologyOf(node string) map[string]string {
	if f.Groups == nil {
		return nil
	}
	return f.Groups.Labels(node)
}

// groupSize counts the eligible nodes of g.
func (f NodeFacts) groupSize(g Group) int {
	if f.Groups == nil {
		return 0
	}
	return f.Groups.Size(g)
}

// HasRuleTaint reports whether node carries the taint of the rule key ("pack/id").
func (f NodeFacts) HasRuleTaint(node, key string) bool {
	return slices.Contains(f.Tainted[node], key)
}

// Without is f once node has lost the taint of the rule key: for a caller that
// read the node just now and found the taint gone while f (a cache) still shows
// it. The receiver's maps are not written; Tainted is copied when it changes.
func (f NodeFacts) Without(node, key string) NodeFacts {
	keys := f.Tainted[node]
	if !slices.Contains(keys, key) {
		return f
	}
	tainted := maps.Clone(f.Tainted)
	if rest := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == key }); len(rest) > 0 {
		tainted[node] = rest
	} else {
		delete(tainted, node)
	}
	f.Tainted = tainted
	return f
}

// Config configures a Decider. The zero value gets the defaults documented on each
// field.
type Config struct {
	// MaxMode is the ceiling of every rule's mode: a rule in a higher mode acts in
	// this one (observe < annotate < enforce). Empty means enforce: no ceiling.
	MaxMode rules.Mode
	// DryRun makes every decision that would take capacity (all but KindNone,
	// KindObserve and KindAnnotate, which take none and stay as they are) a
	// KindDryRun that says what would have been done (Of, Reason); the Decider then
	// records nothing: no held faults, no budget use, no storm observations. Each
	// dry-run decision is therefore judged on the facts alone, as if it were the
	// only fault. Dry-run is thus a ceiling of annotate that still reports what
	// enforce would have done. Fleet correlation is the exception: it still
	// observes the firings, so that a fleet fault that would be raised is raised
	// (Fleets) and its members' decisions say they would be held; it holds
	// nothing and waits for no verdict, so it is forgotten once its group is quiet
	// for a window.
	DryRun bool
	// MaxNodes caps the number of faultline-tainted nodes; 0 means no absolute cap.
	MaxNodes int
	// MaxPercent caps faultline-tainted nodes to this share of the eligible nodes
	// (default 10; 100 disables the relative cap).
	MaxPercent float64
	// RuleBudgets caps, per rule key "pack/id", the nodes carrying that rule's
	// taint. A rule with no entry has no cap of its own; 0 holds all its taints.
	RuleBudgets map[string]int

	// DisableStorm turns the storm hold off.
	DisableStorm bool
	// StormShare: a rule firing on more than this share of the eligible nodes
	// within StormWindow is a storm (default 0.2).
	StormShare float64
	// StormMinNodes: a storm needs at least this many nodes (default 3).
	StormMinNodes int
	// StormWindow is the sliding window of storm detection (default 10m).
	StormWindow time.Duration

	// MaxHeld bounds the held queue (default 1000). When it is full the least
	// actionable entry is evicted (opted-out first, then storm, then the oldest)
	// and counted in Stats.HeldEvicted.
	MaxHeld int
	// HeldTTL drops held faults older than this (counted in Stats.HeldExpired);
	// 0 keeps them until they are released.
	HeldTTL time.Duration
	// PendingTTL is how long a granted taint counts against the budgets on its own,
	// whatever the facts say (default 5m). It covers the lag between a decision and
	// the caller's view of the node, so it must exceed that lag. Untainted and
	// NotApplied free a grant before its time.
	PendingTTL time.Duration

	// Fleet configures fleet correlation (fleet.go); off without labels.
	Fleet FleetConfig

	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Defaults.
const (
	DefaultMaxPercent    = 10
	DefaultStormShare    = 0.2
	DefaultStormMinNodes = 3
	DefaultStormWindow   = 10 * time.Minute
	DefaultMaxHeld       = 1000
	DefaultPendingTTL    = 5 * time.Minute
)

// eps absorbs float rounding in share and percentage arithmetic (0.29*100 is
// 28.999999999999996 in float64).
const eps = 1e-9

// Decider makes decisions. It is safe for concurrent use.
type Decider struct {
	cfg Config
	now func() time.Time

	mu     sync.Mutex
	grants grants // taints decided, not yet in the facts (budget.go)
	taints *Taints
	held   heldQueue
	storms *StormHold
	st     counters
	fleet  *FleetCorrelation
}

// New validates cfg, applies its defaults and returns a Decider.
func New(cfg Config) (*Decider, error) {
	if cfg.MaxMode == "" {
		cfg.MaxMode = rules.ModeEnforce
	}
	if _, err := rules.ParseMode(string(cfg.MaxMode)); err != nil {
		return nil, fmt.Errorf("decide: MaxMode: %w", err)
	}
	if cfg.MaxNodes < 0 {
		return nil, fmt.Errorf("decide: MaxNodes %d is negative", cfg.MaxNodes)
	}
	if cfg.MaxPercent == 0 {
		cfg.MaxPercent = DefaultMaxPercent
	}
	if cfg.MaxPercent < 0 || cfg.MaxPercent > 100 || math.IsNaN(cfg.MaxPercent) {
		return nil, fmt.Errorf("decide: MaxPercent %v is not in (0, 100]", cfg.MaxPercent)
	}
	for k, v := range cfg.RuleBudgets {
		if v < 0 {
			return nil, fmt.Errorf("decide: rule budget of %s is negative (%d)", k, v)
		}
	}
	if cfg.StormShare == 0 {
		cfg.StormShare = DefaultStormShare
	}
	if cfg.StormShare < 0 || cfg.StormShare > 1 || math.IsNaN(cfg.StormShare) {
		return nil, fmt.Errorf("decide: StormShare %v is not in (0, 1]", cfg.StormShare)
	}
	if cfg.StormMinNodes == 0 {
		cfg.StormMinNodes = DefaultStormMinNodes
	}
	if cfg.StormMinNodes < 1 {
		return nil, fmt.Errorf("decide: StormMinNodes %d is below 1", cfg.StormMinNodes)
	}
	if cfg.StormWindow == 0 {
		cfg.StormWindow = DefaultStormWindow
	}
	if cfg.StormWindow < 0 {
		return nil, fmt.Errorf("decide: StormWindow %v is negative", cfg.StormWindow)
	}
	if cfg.MaxHeld == 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.MaxHeld < 1 {
		return nil, fmt.Errorf("decide: MaxHeld %d is below 1", cfg.MaxHeld)
	}
	if cfg.HeldTTL < 0 {
		return nil, fmt.Errorf("decide: HeldTTL %v is negative", cfg.HeldTTL)
	}
	if cfg.PendingTTL == 0 {
		cfg.PendingTTL = DefaultPendingTTL
	}
	if cfg.PendingTTL < 0 {
		return nil, fmt.Errorf("decide: PendingTTL %v is negative", cfg.PendingTTL)
	}
	if err := cfg.Fleet.validate(); err != nil {
		return nil, err
	}
	rb := make(map[string]int, len(cfg.RuleBudgets))
	for k, v := range cfg.RuleBudgets {
		rb[k] = v
	}
	cfg.RuleBudgets = rb
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	d := &Decider{
		cfg:    cfg,
		now:    now,
		grants: grants{},
		held:   heldQueue{byKey: map[string]*heldEntry{}},
		st:     newCounters(),
	}
	d.taints = &Taints{mu: &d.mu, now: now, cfg: &d.cfg, grants: d.grants}
	d.fleet = &FleetCorrelation{mu: &d.mu, now: now, cfg: &d.cfg, held: &d.held, st: &d.st, groups: map[string]*fleetGroup{}}
	d.storms = &StormHold{mu: &d.mu, now: now, cfg: &d.cfg, held: &d.held, st: &d.st, storms: map[string]*storm{}}
	return d, nil
}

// Fleet is fleet correlation: the fleet faults, an operator's verdicts on them,
// the state a new leader takes over.
func (d *Decider) Fleet() *FleetCorrelation { return d.fleet }

// Taints is the budget's account of the taints decided: what is left, and the
// taints that went (untainted, not applied).
func (d *Decider) Taints() *Taints { return d.taints }

// Storms is the storm hold: the rules in a storm, an operator's release, the
// state a new leader takes over.
func (d *Decider) Storms() *StormHold { return d.storms }

// Config returns the effective configuration (defaults applied).
func (d *Decider) Config() Config {
	c := d.cfg
	c.RuleBudgets = make(map[string]int, len(d.cfg.RuleBudgets))
	for k, v := range d.cfg.RuleBudgets {
		c.RuleBudgets[k] = v
	}
	return c
}

// Budget is the number of nodes faultline may keep tainted among eligible nodes:
// floor(MaxPercent * eligible / 100), but at least 1 when eligible > 0, and at
// most MaxNodes when that is set.
//
// The floor keeps the relative cap a true maximum (10% of 25 nodes is 2, not 3);
// the minimum of 1 keeps small clusters protected at all: without it, a cluster of
// fewer than 10 nodes at the default 10% could never take a node that fell off the
// bus out of scheduling. The price is that a 2-node cluster may lose half its nodes;
// MaxNodes or per-rule budgets cannot lower it to 0 globally, a per-rule budget of 0
// can for one rule.
func (c Config) Budget(eligible int) int {
	if eligible <= 0 {
		return 0
	}
	b := int(math.Floor(c.MaxPercent*float64(eligible)/100 + eps))
	if b < 1 {
		b = 1
	}
	if c.MaxNodes > 0 && c.MaxNodes < b {
		b = c.MaxNodes
	}
	return b
}

// Decide decides what to do with a fault that the correlator fired.
func (d *Decider) Decide(f fault.Fault, facts NodeFacts) Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if f.Rule == nil {
		return d.finish(Decision{Kind: KindNone, Fault: f, Message: "fault has no rule"}, false, now)
	}
	d.grants.expire(now, d.cfg.PendingTTL)
	d.storms.refresh(now)
	d.fleet.refresh(now)
	key := f.Rule.String()
	if dec, ok := d.staged(f); ok {
		return d.finish(dec, false, now)
	}
	switch f.Rule.Action {
	case rules.ActionEvent:
		return d.finish(Decision{Kind: KindEvent, Fault: f, Message: "rule " + key + " posts an Event"}, false, now)
	case rules.ActionTaint:
		if !d.cfg.DryRun {
			d.storms.observe(key, f.Node, now, facts.Eligible)
		}
		d.fleet.observe(f, facts, now)
		return d.finish(d.taintPath(f, facts), true, now)
	case rules.ActionProbe:
		if !d.cfg.DryRun {
			d.storms.observe(key, f.Node, now, facts.Eligible)
		}
		d.fleet.observe(f, facts, now)
		if e := d.held.get(f.Key()); e != nil && e.probeFailed {
			// A probe already failed for this fault and it waits for room; the new
			// firing only refreshes the evidence.
			dec := d.taintPath(f, facts)
			dec.Message += " (a probe already failed)"
			return d.finish(dec, true, now)
		}
		return d.finish(d.probePath(f, facts), false, now)
	default:
		return d.finish(Decision{Kind: KindNone, Fault: f,
			Message: fmt.Sprintf("rule %s has action %q: nothing to do", key, f.Rule.Action)}, false, now)
	}
}

// Release re-examines the held faults against facts, oldest first, and returns
// those that can go ahead now, removing them from the queue: KindTaint (budget is
// reserved for them as for Decide), KindProbe (a probe rule whose storm or opt-out
// ended) or KindAlreadyTainted (the node carries the taint by now; nothing to do).
// The caller calls it periodically and after untainting nodes. In dry-run mode
// nothing is held and Release returns nil.
func (d *Decider) Release(facts NodeFacts) []Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.grants.expire(now, d.cfg.PendingTTL)
	d.storms.refresh(now)
	d.fleet.refresh(now)
	d.held.expire(now, d.cfg.HeldTTL, &d.st)
	var out []Decision
	for _, e := range slices.Clone(d.held.entries) {
		// A held fault whose rule's mode dropped below enforce since (a pack
		// reload) takes no capacity any more: it leaves the queue, recorded only.
		dec, staged := d.staged(e.fault)
		switch {
		case staged:
		case e.probeFailed || e.fault.Rule.Action != rules.ActionProbe:
			dec = d.taintPath(e.fault, facts)
		default:
			dec = d.probePath(e.fault, facts)
		}
		dec.Mode = d.Mode(e.fault.Rule)
		if dec.Kind == KindHold {
			e.reason, e.message = dec.Reason, dec.Message
			continue
		}
		d.held.remove(e.key)
		dec.Message = fmt.Sprintf("released after %s held: %s", now.Sub(e.since).Round(time.Second), dec.Message)
		if dec.Kind == KindTaint {
			d.grants.grant(e.fault, now)
		}
		d.st.released++
		d.st.decisions[dec.Kind]++
		out = append(out, dec)
	}
	return out
}

// Mode is the mode rule r acts in: its own (enforce when unset), lowered to
// Config.MaxMode.
func (d *Decider) Mode(r *rules.Compiled) rules.Mode { return modeOf(r, d.cfg.MaxMode) }

// modeOf is the mode r acts in under the ceiling maxMode.
func modeOf(r *rules.Compiled, maxMode rules.Mode) rules.Mode {
	m := r.Mode
	if m == "" {
		m = rules.ModeEnforce
	}
	return m.Cap(maxMode)
}

// staged decides on a fault whose rule's mode keeps it from its action: observe
// for any action, annotate for the actions that take capacity (taint, probe; an
// event rule in mode annotate posts its Event as in enforce). ok is false when the
// rule acts as written. It changes nothing.
func (d *Decider) staged(f fault.Fault) (dec Decision, ok bool) {
	r := f.Rule
	mode := d.Mode(r)
	if mode == rules.ModeEnforce || r.Action == rules.ActionNone ||
		(mode == rules.ModeAnnotate && r.Action == rules.ActionEvent) {
		return Decision{}, false
	}
	why := "rule " + r.String() + " is in mode " + string(mode)
	if mode != r.Mode && r.Mode != "" {
		why += fmt.Sprintf(" (its mode %s lowered by the controller's ceiling)", r.Mode)
	}
	if mode == rules.ModeObserve {
		return Decision{Kind: KindObserve, Fault: f,
			Message: fmt.Sprintf("%s: counted, not acted on (action %s)", why, r.Action)}, true
	}
	return Decision{Kind: KindAnnotate, Fault: f,
		Message: fmt.Sprintf("%s: recorded, no %s", why, r.Action)}, true
}

// taintPath decides on a fault whose next step is a taint. It changes nothing.
func (d *Decider) taintPath(f fault.Fault, facts NodeFacts) Decision {
	if dec, ok := d.stopped(f, facts); ok {
		return dec
	}
	key := f.Rule.String()
	if lim, ok := d.cfg.RuleBudgets[key]; ok {
		if n := d.grants.ruleNodes(key, facts); n >= lim {
			return Decision{Kind: KindHold, Reason: ReasonRuleBudget, Fault: f,
				Message: fmt.Sprintf("rule budget of %s exhausted: %d of %d nodes carry its taint", key, n, lim)}
		}
	}
	used := d.grants.used(facts)
	if dec, ok := d.fleet.groupBudgetHold(f, facts, used); ok {
		return dec
	}
	budget := d.cfg.Budget(facts.Eligible)
	// A node faultline already tainted takes another taint for free, but only while
	// the view is within the budget: a view over it may hold a node that was
	// untainted since (lagging facts), and tainting it again would add a node.
	if used[f.Node] && len(used) <= budget {
		return Decision{Kind: KindTaint, Fault: f,
			Message: "node is already tainted by faultline; no budget used"}
	}
	if len(used) >= budget {
		return Decision{Kind: KindHold, Reason: ReasonBudget, Fault: f,
			Message: fmt.Sprintf("budget exhausted: %d of %d nodes tainted by faultline (%s of %d eligible nodes)",
				len(used), budget, d.grants.text(&d.cfg), facts.Eligible)}
	}
	return Decision{Kind: KindTaint, Fault: f,
		Message: fmt.Sprintf("budget %d of %d used after this taint", len(used)+1, budget)}
}

// stopped decides on a fault whose next step is a taint or a probe where what
// stops both does: the node carries the rule's taint already, is opted out, or a
// fleet fault or a storm holds the fault. ok is false when none does.
func (d *Decider) stopped(f fault.Fault, facts NodeFacts) (Decision, bool) {
	key := f.Rule.String()
	if d.grants.hasRuleTaint(f.Node, key, facts) {
		return Decision{Kind: KindAlreadyTainted, Fault: f, Message: "node already carries the taint of " + key}, true
	}
	if facts.OptedOut[f.Node] {
		return Decision{Kind: KindHold, Reason: ReasonOptedOut, Fault: f,
			Message: "node is labelled " + fault.LabelOptOut + "=true"}, true
	}
	// A fleet fault names the cause (the shared part) where a storm only counts
	// nodes: the faults it holds are reported by it alone.
	if dec, ok := d.fleet.decision(f); ok {
		return dec, true
	}
	if s := d.storms.get(key); s.holding() {
		return Decision{Kind: KindHold, Reason: ReasonStorm, Fault: f, Message: s.describe(key)}, true
	}
	return Decision{}, false
}

// probePath decides on a fault of a probe rule before its probe ran. It changes
// nothing. Probes need no budget (it is checked on the result), but a storm holds
// them: probing a large part of the fleet at once disturbs its jobs.
func (d *Decider) probePath(f fault.Fault, facts NodeFacts) Decision {
	if dec, ok := d.stopped(f, facts); ok {
		return dec
	}
	return Decision{Kind: KindProbe, Fault: f, Message: fmt.Sprintf("run probes %v to confirm", f.Rule.Probe.Checks)}
}

// asDryRun counts dec as a dry-run of what it would have done, and wraps it so.
func (st *counters) asDryRun(dec Decision) Decision {
	st.decisions[KindDryRun]++
	st.dryRuns[dec.Kind]++
	dec.Of, dec.Kind = dec.Kind, KindDryRun
	dec.Message = "dry-run: would " + string(dec.Of) + ": " + dec.Message
	return dec
}

// finish applies a decision's effects (unless dry-run), counts it and wraps it for
// dry-run. probeFailed marks a hold whose release needs no further probe.
func (d *Decider) finish(dec Decision, probeFailed bool, now time.Time) Decision {
	if dec.Fault.Rule != nil {
		dec.Mode = d.Mode(dec.Fault.Rule)
	}
	if d.cfg.DryRun {
		switch dec.Kind {
		case KindNone, KindObserve, KindAnnotate:
			// These take no capacity: dry-run leaves them as they are.
			d.st.decisions[dec.Kind]++
			return dec
		}
		return d.st.asDryRun(dec)
	}
	d.st.decisions[dec.Kind]++
	switch dec.Kind {
	case KindTaint:
		d.grants.grant(dec.Fault, now)
		d.held.remove(dec.Fault.Key())
	case KindAlreadyTainted, KindObserve, KindAnnotate:
		// The node has the taint, or the rule no longer asks for one.
		if d.held.remove(dec.Fault.Key()) != nil {
			d.st.heldCleared++
		}
	case KindHold:
		d.st.holds[dec.Reason]++
		d.held.expire(now, d.cfg.HeldTTL, &d.st)
		d.held.hold(dec, probeFailed, now, d.cfg.MaxHeld, &d.st)
	}
	return dec
}

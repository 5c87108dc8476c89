// Package replay runs rule packs over a stretch of Loki's history through the
// controller's own stages — the Loki source's catch-up reads (lokisource.History),
// match and correlate (match.Stage), decide with its budgets and storm hold
// (decide.Decider) — and records what would have been done, instead of acting.
//
// The decider's clock is the replayed line's time, so its windows (storm, pending
// grants) run on history's time. The facts it decides on are the live fleet's
// (eligible nodes, opted-out nodes: see Fleet) with the taints of the replay itself:
// a node starts untainted, a taint decision taints it, and it is untainted again when
// its rule's recovery policy allows (decide.Recoverable: after a quiet time, or when
// the node's lines carry a new boot id). Probes are not run: a probe decision is
// reported as such, and its taint is not assumed. Nothing is written anywhere.
//
// A rule's escalation ladder climbs as in the controller (ladder.go): the decide
// stage's decide.NextStep and Decider.Escalate, on the firings of the replayed
// lines. Fleet correlation runs in the decider with the live fleet's topology
// labels; a fleet fault raised holds its members' taints to the end of the stretch,
// as no operator's verdict is replayed.
package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/controller/match"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// Config configures a replay of one pack set.
type Config struct {
	// Loki is the source's configuration (URL, auth, TLS, limits); its Queries are
	// built from the packs with Selectors (default lokisource.DefaultSelectors).
	Loki      lokisource.Config
	Selectors lokisource.Selectors
	// Range is the stretch of history to read (From, To, Step, MaxLines).
	Range lokisource.Range
	// Decide configures the budgets and the storm hold as the controller's; DryRun
	// and Now are replay's own.
	Decide decide.Config
	// Fleet is the live fleet the decisions rest on.
	Fleet Fleet
	// ReconcileEvery is how often, in history's time, recoveries are applied and
	// held faults released, as the controller's reconcile loop does (default 10s).
	ReconcileEvery time.Duration
	// MaxActions bounds the distinct (node, rule, decision) rows kept; more is an
	// error (default 100,000).
	MaxActions int
}

// Run replays the lines of cfg.Range through the stages with the engine's packs.
func Run(ctx context.Context, cfg Config, eng *rules.Engine) (*Result, error) {
	if eng == nil {
		return nil, errors.New("replay: no rule engine")
	}
	if cfg.Selectors == nil {
		cfg.Selectors = lokisource.DefaultSelectors()
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = 10 * time.Second
	}
	if cfg.MaxActions <= 0 {
		cfg.MaxActions = 100_000
	}
	lc := cfg.Loki
	lc.Queries = lokisource.EngineQueries(cfg.Selectors, eng)
	lc.BootID = nil // history keeps every boot's lines: each is a fault of its time
	src, err := lokisource.New(lc)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r := &run{
		cfg:       cfg,
		eng:       eng,
		res:       newResult(cfg.MaxActions),
		facts:     cfg.Fleet.facts(),
		taints:    map[string]*taint{},
		boots:     map[string]string{},
		lastMatch: map[string]time.Time{},
		ladders:   map[string]*ladder{},
	}
	dc := cfg.Decide
	dc.DryRun = false // replay records the decisions' effects on its own facts
	dc.Now = func() time.Time { return r.now }
	if r.dec, err = decide.New(dc); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r.match = match.New(func() *rules.Engine { return eng })
	for _, q := range lc.Queries {
		r.res.Queries = append(r.res.Queries, q.LogQL)
	}
	if err := src.History(ctx, cfg.Range, r.line); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if !r.now.IsZero() {
		// Steps that fall due after the last line, up to the end of the stretch.
		if err := r.advance(cfg.Range.To); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if err := r.reconcile(); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	r.res.Lines, r.res.NoNode = r.match.Stats.Lines, r.match.Stats.NoNode
	r.res.finish(r.dec.Held(), r.dec.Fleet().Faults())
	r.res.FleetDropped = r.dec.Fleet().Dropped()
	return r.res, nil
}

// run is one replay's state.
type run struct {
	cfg   Config
	eng   *rules.Engine
	match *match.Stage
	dec   *decide.Decider
	res   *Result

	now           time.Time // the time of the line being replayed: the decider's clock
	lastReconcile time.Time
	facts         decide.NodeFacts
	taints        map[string]*taint    // fault key → the replay's taint
	boots         map[string]string    // node → boot id of its newest line
	lastMatch     map[string]time.Time // fault key → last match of its rule on its node
	ladders       map[string]*ladder   // fault key → its climb of its rule's ladder
}

// taint is a taint the replay placed.
type taint struct {
	fault fault.Fault
	boot  string
	since time.Time
}

// line is one line through match → decide, as the controller's pipeline runs it.
func (r *run) line(l logstream.Line) error {
	if err := r.advance(l.Time); err != nil {
		return err
	}
	if l.Time.After(r.now) {
		r.now = l.Time
	}
	if b := l.Labels[logstream.MetaBootID]; b != "" && l.Node != "" {
		r.boots[l.Node] = b
	}
	if r.now.Sub(r.lastReconcile) >= r.cfg.ReconcileEvery {
		if err := r.reconcile(); err != nil {
			return err
		}
	}
	if l.Node != "" && !r.cfg.Fleet.owns(l.Node) {
		r.res.OtherShard++ // another shard's controller decides it
		return nil
	}
	res := r.match.Process(l)
	for _, o := range res.Matches {
		r.lastMatch[fault.Key(l.Node, o.Rule.Pack, o.Rule.ID)] = l.Time
	}
	for _, f := range res.Faults {
		if f.Rule.Action == rules.ActionNone {
			continue // evidence-only rules need no decision
		}
		if err := r.apply(r.dec.Decide(f, r.facts)); err != nil {
			return err
		}
	}
	return nil
}

// apply records a decision and carries its effect out on the replay's facts; a
// firing that feeds a ladder climbs it, as the controller's escalate.Ladders.Fire does.
func (r *run) apply(d decide.Decision) error {
	if d.Kind == decide.KindTaint {
		r.taint(d.Fault)
	}
	if err := r.res.add(d, r.now); err != nil {
		return err
	}
	if decide.Laddered(d) {
		return r.fire(d.Fault)
	}
	return nil
}

// taint notes f's taint in the replay's facts.
func (r *run) taint(f fault.Fault) {
	key := f.Rule.String()
	if !r.facts.HasRuleTaint(f.Node, key) {
		r.facts.Tainted[f.Node] = append(r.facts.Tainted[f.Node], key)
	}
	if r.taints[f.Key()] == nil {
		r.taints[f.Key()] = &taint{fault: f, boot: r.boots[f.Node], since: r.now}
	}
}

// reconcile does what the controller's reconcile loop does, on history's time:
// recoveries first, then the release of held faults into the room they left.
func (r *run) reconcile() error {
	r.lastReconcile = r.now
	for key, t := range r.taints {
		f := t.fault
		active := decide.ActiveFault{Node: f.Node, Rule: f.Rule, Record: &v1alpha1.NodeFault{
			Spec:   v1alpha1.NodeFaultSpec{Node: f.Node, Pack: f.Rule.Pack, Rule: f.Rule.ID},
			Status: v1alpha1.NodeFaultStatus{LastSeen: &metav1.Time{Time: f.Time}, BootID: t.boot}}}
		ok, _ := r.dec.Recoverable(active, r.now, r.boots[f.Node], r.lastMatch[key])
		if !ok {
			continue
		}
		delete(r.taints, key)
		delete(r.ladders, key) // the next taint climbs from the first step
		r.untaint(f.Node, f.Rule.String())
		r.dec.Taints().Untainted(f.Node, f.Rule.String())
		r.res.recovered(f)
	}
	for _, d := range r.dec.Release(r.facts) {
		if err := r.apply(d); err != nil {
			return err
		}
	}
	// The controller's reconcileLadders: steps due without a firing, and retries
	// of held ones.
	for _, key := range r.climbing() {
		if err := r.climb(key); err != nil {
			return err
		}
	}
	return nil
}

// untaint removes the rule key from the node's taints in the replay's facts.
func (r *run) untaint(node, key string) {
	keys := r.facts.Tainted[node]
	out := keys[:0]
	for _, k := range keys {
		if k != key {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		delete(r.facts.Tainted, node)
		return
	}
	r.facts.Tainted[node] = out
}

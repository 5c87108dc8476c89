// The controller's pipeline, in one place. While this replica leads, each log line
// goes through these stages, in this order; each is a package, consumed here through
// the small interface below that names only what the line path calls of it:
//
//	source   lineSource    lokisource.Source   Loki (LogQL tail + catch-up) → logstream.Line
//	match    lineMatcher   match.Stage         line → rule hits → correlated fault.Fault
//	decide   faultDecider  decide.Decider      fault + decide.NodeFacts → decide.Decision
//	                                           (modes, budgets, storm hold, fleet faults,
//	                                           held queue, dry-run)
//	         factsReader   act.Actor           the decide.NodeFacts a decision rests on
//	act      carrier (carry.go)                decision → act.Actor (taint, Event) and
//	                                           the recorder (the NodeFault record),
//	                                           carried out by actqueue.Queue: a pool of
//	                                           workers, one task at a time per node
//
// Beside the line stream, started with it and stopped with it:
//
//	trigger  trigger.Triggers          probe runs: schedule (RunSchedules), deep checks
//	                                   (RunDeepChecks), rule
//	                                   confirmation (Confirm), recovery (Recovery), API
//	reconcile Controller.Reconcile     recoveries, taints removed by hand, held-fault
//	                                   release (through the carrier's queue), ladders,
//	                                   NodeFault collection
//	position keeper.saveLoop           the read position, for the next leader
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/faultline-dev/faultline/controller/actqueue"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/controller/match"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// The stages as the line path consumes them.
type (
	// lineSource reads the log lines from a read position on, in arrival order.
	lineSource interface {
		Run(ctx context.Context, from lokisource.Checkpoint, emit func(logstream.Line) error) error
	}
	// lineMatcher turns a line into rule matches and correlated faults.
	lineMatcher interface {
		Process(logstream.Line) match.Result
	}
	// faultDecider decides what to do about a fault, given the nodes' facts.
	faultDecider interface {
		Decide(fault.Fault, decide.NodeFacts) decide.Decision
	}
	// factsReader reads the nodes' facts (taints, eligibility) a decision rests on.
	factsReader interface {
		Facts() (decide.NodeFacts, error)
	}
)

// stages is the line path: source → match → decide → act.
type stages struct {
	source lineSource
	match  lineMatcher
	facts  factsReader
	decide faultDecider
	// act carries a decision out, later and on a worker; an error (ctx ended while
	// the queue was full) leaves the line not fully decided.
	act func(ctx context.Context, line uint64, d decide.Decision) error
	// queue carries the decisions out and knows which lines are done.
	queue *actqueue.Queue

	carrier *carrier
	owns    func(node string) bool // the node is this shard's
	seen    *lastSeen
	m       *Metrics
}

// lead runs the pipeline while this replica holds the lease.
func (c *Controller) lead(ctx context.Context) {
	c.m.leader.Set(1)
	defer c.m.leader.Set(0)
	// Only the leader's storm hold decides: a former leader says no storm.
	defer c.m.storms.Reset()
	c.log.Info("leading: reading Loki")
	// The ProbeRuns are run by the leader, whatever becomes of the line pipeline.
	runs := make(chan struct{})
	go func() {
		defer close(runs)
		c.probeRuns.Run(ctx)
	}()
	defer func() { <-runs }()
	if c.cfg.WhileLeading != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.cfg.WhileLeading(ctx)
		}()
		defer func() { <-done }()
	}
	// The pipeline returns only when it fails or ctx ends: restart it 2s after
	// each failure.
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.pipeline(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("pipeline stopped, restarting", "err", err)
		}
	}, 2*time.Second)
}

// pipeline runs the stages (see the top of this file) until ctx ends or the source
// fails.
func (c *Controller) pipeline(ctx context.Context) error {
	from, saved, err := c.keep.load(ctx)
	if err != nil {
		return err
	}
	lc := c.cfg.Loki
	lc.Queries = lokisource.EngineQueries(c.cfg.Selectors, c.packs.Engine())
	lc.Metrics = c.m.loki
	lc.Backstop = c.intake.pushing
	lc.BootID = func(node string) string {
		// "" (no filtering) while the Node is unknown or the cache not synced.
		id, _ := c.actor.BootID(node)
		return id
	}
	if lc.Logger == nil {
		lc.Logger = c.log
	}
	src, err := lokisource.New(lc)
	if err != nil {
		return err
	}
	q, err := actqueue.New(c.cfg.ActWorkers, actLimit(c.cfg.ActWorkers))
	if err != nil {
		return err
	}
	pos := &positions{src: src, q: q, last: from}
	c.mu.Lock()
	c.src, c.pos, c.leading = src, pos, true
	c.mu.Unlock()
	c.shard.lead(true)
	c.carrier.term(q)
	defer func() {
		c.mu.Lock()
		c.src, c.pos, c.leading = nil, nil, false
		c.mu.Unlock()
		c.shard.lead(false)
		c.carrier.term(nil)
	}()
	// A taint the previous leader was placing when it stopped is adopted or its
	// record cleared; faults it held wait here too, in their order.
	c.rec.checkPlacing(ctx, 0)
	c.resumeHeld(ctx)
	st := stages{
		source: src,
		match:  match.New(c.packs.Engine),
		facts:  c.actor,
		decide: c.decider,
		queue:  q,

		carrier: c.carrier,
		owns:    c.shard.owns,
		seen:    c.seen,
		m:       c.m,
	}
	st.act = func(ctx context.Context, line uint64, d decide.Decision) error {
		decided := time.Now()
		observe := func() { c.m.carryTime.WithLabelValues(string(d.Kind)).Observe(time.Since(decided).Seconds()) }
		return q.Add(ctx, line, d.Fault.Node, func(ctx context.Context) actqueue.Task {
			rest := c.carrier.apply(ctx, d)
			c.m.fenceTime.WithLabelValues(string(d.Kind)).Observe(time.Since(decided).Seconds())
			if rest == nil {
				observe()
				return nil
			}
			return func(ctx context.Context) actqueue.Task { rest(ctx); observe(); return nil }
		})
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Both paths (Loki's reading and the collector's push) go through one gate, one
	// line at a time, and each line is decided once, by the path that brings it first.
	gate := &lineGate{st: st, dedupe: newLineDedupe(dedupeWindow, time.Now), earlier: src.EarlierBoot}
	if saved {
		warmUp(pctx, src, from, c.packs.Engine().Set().Horizon(), func(l logstream.Line) {
			if l.Node != "" && c.shard.owns(l.Node) {
				st.match.Process(l)
			}
		}, c.m.warmLines, c.log)
	}
	beside := []func(context.Context){
		c.triggers.RunSchedules,
		c.triggers.RunDeepChecks,
		c.reconcileLoop,
		c.gauges.loop,
		q.Run,
		func(ctx context.Context) { c.keep.saveLoop(ctx, pos) },
	}
	var wg sync.WaitGroup
	for _, run := range beside {
		wg.Add(1)
		go func() { defer wg.Done(); run(pctx) }()
	}
	// Pushed lines are taken once the queue's workers run.
	c.intake.set(func(lines []logstream.Line) error { return gate.push(pctx, lines) })
	defer c.intake.set(nil)
	// source → match → decide, one line at a time, in arrival order; act on the
	// queue's workers. The line is read on while they work, until the queue is full.
	err = st.source.Run(pctx, from, func(l logstream.Line) error { return gate.read(pctx, l) })
	cancel()
	wg.Wait()
	// Save the last position whose lines were all carried out, so the next leader
	// starts exactly there; the lines of work cancelled above it are decided again.
	c.keep.save(context.WithoutCancel(ctx), pos, false)
	return err
}

// process runs one line through match → decide and queues the decisions; hit says
// whether a rule's pattern matched it (match.Result.Hit).
func (st stages) process(ctx context.Context, e logstream.Line) (hit bool, err error) {
	line := st.queue.Begin()
	hit, err = st.decideLine(ctx, line, e)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// Cancelled during the line (leadership lost, shutdown): its decisions may be
		// half done, so the line stays unread and the next leader decides it again.
		return hit, fmt.Errorf("line of %s at %s not fully decided: %w", e.Node, e.Time.Format(time.RFC3339Nano), err)
	}
	st.queue.End(line)
	return hit, nil
}

// decideLine runs one line through match → decide and hands each decision to act.
func (st stages) decideLine(ctx context.Context, line uint64, e logstream.Line) (hit bool, err error) {
	st.m.lines.WithLabelValues(e.Query).Inc()
	if e.Node != "" && !st.owns(e.Node) {
		st.m.otherShard.Inc() // its shard's controller reads it too
		return false, nil
	}
	res := st.match.Process(e)
	if e.Node == "" {
		st.m.noNode.Inc()
	}
	for _, o := range res.Matches {
		st.m.matches.WithLabelValues(o.Rule.String(), string(o.Rule.Severity)).Inc()
		st.seen.note(fault.Key(e.Node, o.Rule.Pack, o.Rule.ID), e.Time)
	}
	for _, f := range res.Faults {
		if f.Rule.Action == rules.ActionNone {
			continue // evidence-only rules (context lines) need no decision
		}
		d, err := st.carrier.decide(f, st.facts, st.decide)
		if err != nil {
			// The line stays unread: the term restarts and decides it again.
			return true, fmt.Errorf("node facts: %w", err)
		}
		st.m.decideDelay.Observe(time.Since(e.Time).Seconds())
		if err := st.act(ctx, line, d); err != nil {
			// Not carried out: its grant would hold budget for a taint never placed.
			if d.Kind == decide.KindTaint {
				st.carrier.notApplied(f)
			}
			return true, err
		}
	}
	return res.Hit, nil
}

// lastSeen remembers when each fault (by key) last matched a line: a recovery
// "after" counts from the last match, not from the taint.
type lastSeen struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (l *lastSeen) note(key string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.at) >= maxLastSeen {
		l.at = map[string]time.Time{} // the oldest are long past their recovery
	}
	l.at[key] = t
}

func (l *lastSeen) get(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at[key]
}

// maxLastSeen bounds the faults remembered by lastSeen.
const maxLastSeen = 200000

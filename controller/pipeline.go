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
//	act      Controller.apply                  decision → act.Actor (taint, Event) and
//	                                           nodefault.Store (the NodeFault record),
//	                                           carried out by actqueue.Queue: a pool of
//	                                           workers, one task at a time per node
//
// Beside the line stream, started with it and stopped with it:
//
//	trigger  trigger.Triggers          probe runs: schedule (RunSchedules), rule
//	                                   confirmation (Confirm), recovery (Recovery), API
//	reconcile Controller.Reconcile     recoveries, taints removed by hand, held-fault
//	                                   release, NodeFault collection
//	position Controller.saveLoop       the read position, for the next leader
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/faultline-dev/faultline/controller/act"
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
	act func(ctx context.Context, line uint64, d decide.Decision, seq uint64) error
	// queue carries the decisions out and knows which lines are done.
	queue *actqueue.Queue
}

// lead runs the pipeline while this replica holds the lease.
func (c *Controller) lead(ctx context.Context) {
	c.m.leader.Set(1)
	defer c.m.leader.Set(0)
	c.log.Info("leading: reading Loki")
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
	from, saved, err := c.loadPosition(ctx)
	if err != nil {
		return err
	}
	lc := c.cfg.Loki
	lc.Queries = lokisource.EngineQueries(c.cfg.Selectors, c.packs.Engine())
	lc.Metrics = c.m.loki
	lc.BootID = c.currentBootID
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
	defer func() {
		c.mu.Lock()
		c.src, c.pos, c.leading = nil, nil, false
		c.moves = map[string]bool{}
		c.mu.Unlock()
	}()
	// A taint the previous leader was placing when it stopped is adopted or its
	// record cleared; faults it held wait here too, in their order.
	c.checkPlacing(ctx, 0)
	c.resumeHeld(ctx)
	st := stages{
		source: src,
		match:  match.New(c.packs.Engine),
		facts:  c.actor,
		decide: c.decider,
		queue:  q,
	}
	st.act = func(ctx context.Context, line uint64, d decide.Decision, seq uint64) error {
		decided := time.Now()
		return q.Add(ctx, line, d.Fault.Node, func(ctx context.Context) {
			c.carry(ctx, d, seq)
			c.m.carryTime.WithLabelValues(string(d.Kind)).Observe(time.Since(decided).Seconds())
		})
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if saved {
		warmUp(pctx, src, from, c.packs.Engine().Set().Horizon(), func(l logstream.Line) {
			if l.Node != "" && c.owns(l.Node) {
				st.match.Process(l)
			}
		}, c.m.warmLines, c.log)
	}
	beside := []func(context.Context){
		c.triggers.RunSchedules,
		c.reconcileLoop,
		c.gaugeLoop,
		q.Run,
		func(ctx context.Context) { c.saveLoop(ctx, pos) },
	}
	var wg sync.WaitGroup
	for _, run := range beside {
		wg.Add(1)
		go func() { defer wg.Done(); run(pctx) }()
	}
	// source → match → decide, one line at a time, in arrival order; act on the
	// queue's workers. The line is read on while they work, until the queue is full.
	err = st.source.Run(pctx, from, func(l logstream.Line) error {
		// Cancelled during the line (leadership lost, shutdown): its decisions may be
		// half done, so the line stays unread and the next leader decides it again.
		if err := c.process(pctx, st, l); err != nil {
			return fmt.Errorf("line of %s at %s not fully decided: %w", l.Node, l.Time.Format(time.RFC3339Nano), err)
		}
		return nil
	})
	cancel()
	wg.Wait()
	// Save the last position whose lines were all carried out, so the next leader
	// starts exactly there; the lines of work cancelled above it are decided again.
	c.savePosition(context.WithoutCancel(ctx), pos, false)
	return err
}

// process runs one line through match → decide and queues the decisions.
func (c *Controller) process(ctx context.Context, st stages, e logstream.Line) error {
	line := st.queue.Begin()
	if err := c.decideLine(ctx, st, line, e); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st.queue.End(line)
	return nil
}

// decideLine runs one line through match → decide and hands each decision to act.
func (c *Controller) decideLine(ctx context.Context, st stages, line uint64, e logstream.Line) error {
	c.m.lines.WithLabelValues(e.Query).Inc()
	if e.Node != "" && !c.owns(e.Node) {
		c.m.otherShard.Inc() // its shard's controller reads it too
		return nil
	}
	res := st.match.Process(e)
	if e.Node == "" {
		c.m.noNode.Inc()
	}
	for _, o := range res.Matches {
		c.m.matches.WithLabelValues(o.Rule.String(), string(o.Rule.Severity)).Inc()
		c.mu.Lock()
		c.lastMatch[fault.Key(e.Node, o.Rule.Pack, o.Rule.ID)] = e.Time
		c.mu.Unlock()
	}
	for _, f := range res.Faults {
		if f.Rule.Action == rules.ActionNone {
			continue // evidence-only rules (context lines) need no decision
		}
		d, seq, err := c.decideOne(st, f)
		if err != nil {
			c.log.Error("node facts", "err", err)
			continue
		}
		c.m.decideDelay.Observe(time.Since(e.Time).Seconds())
		if err := st.act(ctx, line, d, seq); err != nil {
			// Not carried out: its grant would hold budget for a taint never placed.
			if d.Kind == decide.KindTaint {
				c.notApplied(f)
			}
			return err
		}
	}
	return nil
}

func (c *Controller) facts() (decide.NodeFacts, error) { return c.actor.Facts() }

// apply carries a decision out and reports it (Event, metric, log).
func (c *Controller) apply(ctx context.Context, d decide.Decision) {
	f := d.Fault
	kind := string(d.Kind)
	result := "ok"
	recorded := false // the decision went to the record with the taint's Placed
	defer func() { c.m.decisions.WithLabelValues(kind, result, string(d.Mode)).Inc() }()
	defer func() {
		if result == "ok" && !recorded {
			c.recordDecision(ctx, d, d.Message)
		}
		// Every firing counts on a ladder, those whose evidence write is skipped too.
		if laddered(d) && (result == "ok" || result == "recent") {
			c.ladderFiring(ctx, f)
		}
	}()
	switch d.Kind {
	case decide.KindTaint, decide.KindAlreadyTainted:
		if d.Kind == decide.KindAlreadyTainted && !c.refreshDue(f.Key()) {
			result = "recent"
			return
		}
		boot, _ := c.actor.BootID(f.Node)
		ch, due := c.decisionChange(d, d.Message)
		res, err := c.actor.TaintNodeRecording(ctx, f, boot, ch)
		recorded = due
		if err != nil {
			if due {
				c.recordUndue(f.Key())
			}
			result = "error"
			if errors.Is(err, act.ErrOptedOut) {
				result = "opted-out"
			}
			c.notApplied(f)
			c.log.Warn("taint not applied", "node", f.Node, "rule", f.Rule.String(), "err", err)
			return
		}
		// The actor records the FaultTainted Event with the evidence.
		c.log.Info("tainted", "node", f.Node, "rule", f.Rule.String(), "added", res.Added, "count", f.Count)
	case decide.KindEvent:
		c.event(ctx, f, act.ReasonEvent, fmt.Sprintf("%s (%s): %s; %s", f.Rule, f.Rule.Severity, f.Rule.Description, lastLine(f)))
	case decide.KindProbe:
		// The taint waits for the probes; the line stream does not.
		msg := fmt.Sprintf("%s: running probes %v to confirm; %s", f.Rule, f.Rule.Probe.Checks, lastLine(f))
		if !c.triggers.On() {
			msg = fmt.Sprintf("%s asks for probes %v, but probes are not configured; applying onTimeout=%s",
				f.Rule, f.Rule.Probe.Checks, f.Rule.Probe.OnTimeout)
		}
		c.event(ctx, f, act.ReasonEvent, msg)
		go c.triggers.Confirm(ctx, f)
	case decide.KindHold:
		reason := act.ReasonHeld
		if d.Reason == decide.ReasonStorm {
			reason = act.ReasonStormHold
		}
		kind = "hold-" + string(d.Reason)
		c.event(ctx, f, reason, fmt.Sprintf("%s held (%s): %s", f.Rule, d.Reason, d.Message))
		c.log.Warn("fault held", "node", f.Node, "rule", f.Rule.String(), "reason", d.Reason, "message", d.Message)
		if d.Reason == decide.ReasonFleet {
			c.syncFleets(ctx)
		}
	case decide.KindDryRun:
		kind = "dry-run-" + string(d.Of)
		c.event(ctx, f, act.ReasonDryRun, fmt.Sprintf("dry-run: would %s for %s: %s", d.Of, f.Rule, lastLine(f)))
	case decide.KindAnnotate:
		c.event(ctx, f, act.ReasonAnnotated, fmt.Sprintf("%s: %s; %s", f.Rule, d.Message, lastLine(f)))
	case decide.KindObserve:
		// Counted by the metric above; the log is the only other trace.
		c.log.Info("observed", "node", f.Node, "rule", f.Rule.String(), "action", f.Rule.Action, "count", f.Count, "message", d.Message)
	case decide.KindNone:
	}
	// Refresh the gauges when a taint or a hold changed them, not on every Event
	// (Reconcile refreshes them periodically too), coalesced: a burst carried out
	// by many workers refreshes them a few times, not once per decision.
	if d.Kind == decide.KindTaint || d.Kind == decide.KindHold {
		c.gaugesDue()
	}
}

// refreshDue says whether the evidence of an already-tainted fault may be written
// now, and notes the write.
func (c *Controller) refreshDue(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if last, ok := c.refreshed[key]; ok && now.Sub(last) < c.cfg.EvidenceRefresh {
		return false
	}
	if len(c.refreshed) > 100000 {
		c.refreshed = map[string]time.Time{}
	}
	c.refreshed[key] = now
	return true
}

func (c *Controller) event(ctx context.Context, f fault.Fault, reason, msg string) {
	if err := c.actor.Event(ctx, f.Node, f, reason, msg); err != nil {
		c.log.Warn("event not recorded", "node", f.Node, "reason", reason, "err", err)
	}
}

func lastLine(f fault.Fault) string {
	if len(f.Evidence) == 0 {
		return ""
	}
	l := f.Evidence[len(f.Evidence)-1].Text
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return fmt.Sprintf("%d match(es), last: %q", f.Count, l)
}

package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/probes"
	"github.com/faultline-dev/faultline/logstream"
)

// LabelHealth is the node label with the latest probe verdict.
const LabelHealth = "faultline.io/health"

// Values of LabelHealth, in precedence order: TESTING while probes run on the node,
// else the worst latest result over the checks that ran there: FAIL (a check
// failed), WARN (a check warned or could not reach a verdict), PASS.
const (
	HealthTesting = "TESTING"
	HealthFail    = "FAIL"
	HealthWarn    = "WARN"
	HealthPass    = "PASS"
)

// ProbeConfig configures the controller's probe triggers. With no agents (AgentPort 0,
// no AgentURLs, no Agents), probes are off: a rule with action probe then applies its
// onTimeout policy.
type ProbeConfig struct {
	// AgentPort and AgentScheme locate a node's agent on the node's InternalIP (the
	// agents use the host network); AgentURLs fixes the URL of some nodes' agents.
	AgentPort   int
	AgentScheme string
	AgentURLs   map[string]string
	// Agents, when set, replaces the above.
	Agents probes.Resolver
	Token  func() (string, error)
	// Local runs the checks the controller runs itself (pvc).
	Local *probe.Runner
	// Schedules: checks run on every selected node at an interval, never overlapping.
	Schedules []Schedule
	// NodeSelector picks the nodes scheduled probes run on (empty: all).
	NodeSelector labels.Selector
	// ConfirmTimeout bounds the probes a rule asks for (default 15m); RecoverEvery is
	// how often a tainted node's recovery probes are retried (default 10m).
	ConfirmTimeout time.Duration
	RecoverEvery   time.Duration
	// NoHealthLabel leaves the faultline.io/health label alone.
	NoHealthLabel bool
	// Batch, NodeTimeout: see probes.Config.
	Batch       int
	NodeTimeout time.Duration
}

// Schedule runs a check periodically.
type Schedule struct {
	Check  string
	Every  time.Duration
	Params probe.Params
}

// probeState is what the controller remembers about probes.
type probeState struct {
	mu         sync.Mutex
	latest     map[string]map[string]probe.Status // node → check → latest status
	confirming map[string]bool                    // fault keys with a confirmation in flight
	recovering map[string]time.Time               // fault ID on node → when its recovery run started
	passed     map[string]time.Time               // fault ID on node → when its recovery probes passed
}

func newProbeState() *probeState {
	return &probeState{latest: map[string]map[string]probe.Status{}, confirming: map[string]bool{},
		recovering: map[string]time.Time{}, passed: map[string]time.Time{}}
}

func (c *Controller) newDispatcher(ctx context.Context) error {
	pc := c.cfg.Probes
	if pc.Agents == nil && (pc.AgentPort > 0 || len(pc.AgentURLs) > 0) {
		r := probes.AgentResolver{Static: pc.AgentURLs, Scheme: pc.AgentScheme, Port: pc.AgentPort}
		if pc.AgentPort > 0 {
			r.Address = c.actor.NodeAddress
		}
		pc.Agents = r
	}
	if pc.Agents == nil {
		return nil
	}
	if pc.ConfirmTimeout <= 0 {
		pc.ConfirmTimeout = 15 * time.Minute
	}
	if pc.RecoverEvery <= 0 {
		pc.RecoverEvery = 10 * time.Minute
	}
	c.cfg.Probes = pc
	d, err := probes.New(probes.Config{Agents: pc.Agents, Token: pc.Token, Local: pc.Local, Batch: pc.Batch,
		NodeTimeout: pc.NodeTimeout, Log: c.log, PickPeer: c.pickPeer,
		OnStart: func(run *probes.Run, node string) { c.setHealth(ctx, node) },
		OnNode:  func(run *probes.Run, nr probes.NodeRun) { c.probeDone(ctx, run, nr) }})
	if err != nil {
		return err
	}
	c.dispatcher = d
	return nil
}

// Probes returns the dispatcher (nil when probes are off).
func (c *Controller) Probes() *probes.Dispatcher { return c.dispatcher }

// probeDone reports one node's results: metrics, a log line per result, an Event
// per run and node, and the health label.
func (c *Controller) probeDone(ctx context.Context, run *probes.Run, nr probes.NodeRun) {
	where := nr.Node
	if where == probes.ClusterNode {
		where = "cluster"
	}
	var parts []string
	for _, r := range nr.Results {
		c.m.probeResults.WithLabelValues(r.Check, string(r.Status), string(run.Trigger)).Inc()
		attrs := []any{"run", run.ID, "trigger", run.Trigger, "node", where, "check", r.Check, "status", r.Status,
			"duration", r.Duration.Round(time.Millisecond).String()}
		if r.Message != "" {
			attrs = append(attrs, "message", r.Message)
		}
		for _, dv := range r.Devices {
			if dv.Status != probe.StatusPass && dv.Status != probe.StatusSkipped {
				attrs = append(attrs, "device_"+dv.ID, string(dv.Status)+": "+dv.Message)
			}
		}
		c.log.Info("probe result", attrs...)
		part := fmt.Sprintf("%s %s", r.Check, r.Status)
		if r.Status != probe.StatusPass && r.Message != "" {
			part += " (" + r.Message + ")"
		}
		parts = append(parts, part)
	}
	if nr.Error != "" {
		c.m.probeResults.WithLabelValues(strings.Join(run.Checks, ","), "error", string(run.Trigger)).Inc()
		c.log.Warn("probe run failed", "run", run.ID, "trigger", run.Trigger, "node", where, "checks", run.Checks, "err", nr.Error)
		parts = append(parts, "error: "+nr.Error)
	}
	if nr.Node == probes.ClusterNode {
		return
	}
	c.ps.mu.Lock()
	m := c.ps.latest[nr.Node]
	if m == nil {
		m = map[string]probe.Status{}
		c.ps.latest[nr.Node] = m
	}
	for _, r := range nr.Results {
		m[r.Check] = r.Status
	}
	if nr.Error != "" && len(nr.Results) == 0 {
		for _, ch := range run.Checks {
			m[ch] = probe.StatusError
		}
	}
	c.ps.mu.Unlock()
	reason := act.ReasonProbePassed
	if nr.Status == probe.StatusFail || nr.Status == probe.StatusError {
		reason = act.ReasonProbeFailed
	}
	msg := fmt.Sprintf("probe run %s (%s", run.ID, run.Trigger)
	if run.Reason != "" {
		msg += ": " + run.Reason
	}
	msg += "): " + strings.Join(parts, "; ")
	if err := c.actor.Event(ctx, nr.Node, fault.Fault{}, reason, msg); err != nil {
		c.log.Warn("event not recorded", "node", nr.Node, "reason", reason, "err", err)
	}
	c.setHealth(ctx, nr.Node)
}

// health computes a node's faultline.io/health value.
func (c *Controller) health(node string) string {
	if c.dispatcher != nil && c.dispatcher.Testing(node) {
		return HealthTesting
	}
	c.ps.mu.Lock()
	defer c.ps.mu.Unlock()
	var ss []probe.Status
	for _, s := range c.ps.latest[node] {
		ss = append(ss, s)
	}
	switch probe.Worst(ss...) {
	case "":
		return ""
	case probe.StatusFail:
		return HealthFail
	case probe.StatusWarn, probe.StatusError:
		return HealthWarn
	}
	return HealthPass
}

func (c *Controller) setHealth(ctx context.Context, node string) {
	if c.cfg.Probes.NoHealthLabel {
		return
	}
	v := c.health(node)
	if v == "" {
		return
	}
	if _, err := c.actor.SetNodeLabel(ctx, node, LabelHealth, v); err != nil {
		c.log.Warn("health label not set", "node", node, "value", v, "err", err)
	}
}

// confirm runs the probes a rule with action probe asks for, then decides.
func (c *Controller) confirm(ctx context.Context, f fault.Fault) {
	key := f.Key()
	c.ps.mu.Lock()
	if c.ps.confirming[key] {
		c.ps.mu.Unlock()
		return
	}
	c.ps.confirming[key] = true
	c.ps.mu.Unlock()
	defer func() {
		c.ps.mu.Lock()
		delete(c.ps.confirming, key)
		c.ps.mu.Unlock()
	}()
	failed, timedOut, summary := false, true, "probes are not configured"
	if c.dispatcher != nil {
		run, err := c.dispatcher.Start(ctx, probes.Request{Nodes: []string{f.Node}, Checks: f.Rule.Probe.Checks,
			Trigger: probes.TriggerRule, Reason: f.Rule.String()})
		if err != nil {
			summary = err.Error()
		} else {
			wctx, cancel := context.WithTimeout(ctx, c.cfg.Probes.ConfirmTimeout)
			run, err = c.dispatcher.Wait(wctx, run.ID)
			cancel()
			if err != nil {
				summary = fmt.Sprintf("no answer within %s", c.cfg.Probes.ConfirmTimeout)
			} else {
				failed, timedOut, summary = judge(run)
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	facts, err := c.facts()
	if err != nil {
		c.log.Error("node facts", "err", err)
		return
	}
	if failed || timedOut {
		// The probe verdict joins the log lines as evidence on the node.
		f.Evidence = append(f.Evidence, logstream.Line{Time: time.Now(), Text: "probe: " + summary})
	}
	next := c.decider.DecideProbeResult(f, failed, timedOut, facts)
	c.log.Info("probe confirmation", "node", f.Node, "rule", f.Rule.String(), "failed", failed, "timed_out", timedOut,
		"summary", summary, "decision", next.Kind, "message", next.Message)
	if next.Kind != decide.KindNone {
		c.apply(ctx, next)
	}
}

// judge reads a finished run: failed when a check failed; timedOut when nothing
// failed but a check could not reach a verdict (error, timeout, refused, agent down).
func judge(run probes.Run) (failed, timedOut bool, summary string) {
	var parts []string
	for _, nr := range run.Nodes {
		for _, r := range nr.Results {
			switch r.Status {
			case probe.StatusFail:
				failed = true
			case probe.StatusError:
				timedOut = true
			}
			s := fmt.Sprintf("%s %s", r.Check, r.Status)
			if r.Message != "" && r.Status != probe.StatusPass {
				s += " (" + r.Message + ")"
			}
			parts = append(parts, s)
		}
		if nr.Error != "" {
			timedOut = true
			parts = append(parts, "error: "+nr.Error)
		}
	}
	if failed {
		timedOut = false
	}
	return failed, timedOut, strings.Join(parts, "; ")
}

// recoveryProbes starts the recovery probes of a tainted fault whose policy waits
// only for them, at most every RecoverEvery; it returns when they last passed.
func (c *Controller) recoveryProbes(ctx context.Context, a decide.ActiveFault, boot string, last, now time.Time) time.Time {
	key := fault.Key(a.Node, a.Evidence.Pack, a.Evidence.Rule)
	c.ps.mu.Lock()
	passed, started := c.ps.passed[key], c.ps.recovering[key]
	c.ps.mu.Unlock()
	if c.dispatcher == nil || a.Rule == nil || len(a.Rule.Recover.Probes) == 0 {
		return passed
	}
	probe := a
	probe.ProbesPassed = now
	if ok, _ := c.decider.Recoverable(probe, now, boot, last); !ok {
		return passed // something else (time, reboot) is still missing
	}
	if passed.After(last) || (!started.IsZero() && now.Sub(started) < c.cfg.Probes.RecoverEvery) {
		return passed
	}
	c.ps.mu.Lock()
	c.ps.recovering[key] = now
	c.ps.mu.Unlock()
	run, err := c.dispatcher.Start(ctx, probes.Request{Nodes: []string{a.Node}, Checks: a.Rule.Recover.Probes,
		Trigger: probes.TriggerRecovery, Reason: a.Evidence.ID()})
	if err != nil {
		c.log.Warn("recovery probes not started", "node", a.Node, "rule", a.Evidence.ID(), "err", err)
		return passed
	}
	go func() {
		r, err := c.dispatcher.Wait(ctx, run.ID)
		if err != nil {
			return
		}
		if failed, timedOut, summary := judge(r); failed || timedOut {
			c.log.Info("recovery probes did not pass", "node", a.Node, "rule", a.Evidence.ID(), "summary", summary)
			return
		}
		c.ps.mu.Lock()
		c.ps.passed[key] = time.Now()
		delete(c.ps.recovering, key)
		c.ps.mu.Unlock()
		c.log.Info("recovery probes passed", "node", a.Node, "rule", a.Evidence.ID())
		c.kick()
	}()
	return passed
}

// scheduleLoop runs each scheduled check on the selected nodes at its interval; a
// run still going when the next is due is not overlapped (that tick is skipped).
func (c *Controller) scheduleLoop(ctx context.Context) {
	if c.dispatcher == nil || len(c.cfg.Probes.Schedules) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, s := range c.cfg.Probes.Schedules {
		if s.Every <= 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(s.Every)
			defer t.Stop()
			var current string
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if current != "" {
					if r, ok := c.dispatcher.Get(current); ok && r.State != probes.StateDone {
						c.log.Warn("scheduled probe still running; skipping this round", "check", s.Check, "run", current)
						c.m.probeSkipped.WithLabelValues(s.Check).Inc()
						continue
					}
				}
				nodes, err := c.probeNodes()
				if err != nil || len(nodes) == 0 {
					continue
				}
				req := probes.Request{Nodes: nodes, Checks: []string{s.Check}, Trigger: probes.TriggerSchedule,
					Reason: "every " + s.Every.String()}
				if len(s.Params) > 0 {
					req.Params = map[string]probe.Params{s.Check: s.Params}
				}
				run, err := c.dispatcher.Start(ctx, req)
				if err != nil {
					c.log.Warn("scheduled probe not started", "check", s.Check, "err", err)
					continue
				}
				current = run.ID
			}
		}()
	}
	wg.Wait()
}

// probeNodes lists the nodes scheduled probes run on.
func (c *Controller) probeNodes() ([]string, error) {
	sel := c.cfg.Probes.NodeSelector
	if sel == nil {
		sel = labels.Everything()
	}
	list, err := c.actor.NodeLister().List(sel)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list))
	for _, n := range list {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out, nil
}

// pickPeer chooses the peer of a network check that names none: the next probe node
// after node (in name order) that carries no faultline taint and whose health is not
// FAIL, so a healthy neighbour measures the suspect link.
func (c *Controller) pickPeer(node string) (string, error) {
	nodes, err := c.probeNodes()
	if err != nil {
		return "", err
	}
	facts, err := c.facts()
	if err != nil {
		return "", err
	}
	start := sort.SearchStrings(nodes, node)
	for i := 1; i <= len(nodes); i++ {
		cand := nodes[(start+i)%len(nodes)]
		if cand == node || len(facts.Tainted[cand]) > 0 || c.health(cand) == HealthFail {
			continue
		}
		if _, err := c.cfg.Probes.Agents.Endpoint(context.Background(), cand); err != nil {
			continue
		}
		return cand, nil
	}
	return "", fmt.Errorf("no healthy probe node besides %s", node)
}

// SelectNodes resolves a label selector to node names (the API's selector field).
func (c *Controller) SelectNodes(selector string) ([]string, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	list, err := c.actor.NodeLister().List(sel)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range list {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out, nil
}

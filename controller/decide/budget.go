package decide

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/controller/fault"
)

// grants are the taints decided within PendingTTL: node → rule key → time granted.
// They count against the budgets (in union with the facts, so a taint the facts
// already show is not counted twice) until PendingTTL has passed. The Decider
// calls them under its lock.
type grants map[string]map[string]time.Time

// untaint drops node's grants of the rule keys (all of them without keys).
func (g grants) untaint(node string, keys ...string) {
	if len(keys) == 0 {
		delete(g, node)
		return
	}
	if m := g[node]; m != nil {
		for _, k := range keys {
			delete(m, k)
		}
		if len(m) == 0 {
			delete(g, node)
		}
	}
}

// untaintBefore drops node's grants made before t.
func (g grants) untaintBefore(node string, t time.Time) {
	m := g[node]
	for key, at := range m {
		if at.Before(t) {
			delete(m, key)
		}
	}
	if len(m) == 0 {
		delete(g, node)
	}
}

func (g grants) text(cfg *Config) string {
	s := fmt.Sprintf("%g%%", cfg.MaxPercent)
	if cfg.MaxNodes > 0 {
		s += fmt.Sprintf(", max %d", cfg.MaxNodes)
	}
	return s
}

// grant reserves budget for a taint the caller is about to apply.
func (g grants) grant(f fault.Fault, now time.Time) {
	keys := g[f.Node]
	if keys == nil {
		keys = map[string]time.Time{}
		g[f.Node] = keys
	}
	keys[f.Rule.String()] = now
}

// expire drops grants older than PendingTTL: by then the facts show the
// taint if it is still there.
//
// A grant is not dropped early when the facts show its taint: facts carry no time,
// and a view that lags may show the same taint from before an untaint, so dropping
// the grant then would let the next, fresher view undercount the node.
func (g grants) expire(now time.Time, ttl time.Duration) {
	for node, keys := range g {
		for key, at := range keys {
			if now.Sub(at) >= ttl {
				delete(keys, key)
			}
		}
		if len(keys) == 0 {
			delete(g, node)
		}
	}
}

func (g grants) hasRuleTaint(node, key string, facts NodeFacts) bool {
	if facts.HasRuleTaint(node, key) {
		return true
	}
	_, ok := g[node][key]
	return ok
}

// used is the set of faultline-tainted nodes: in the facts or granted.
func (g grants) used(facts NodeFacts) map[string]bool {
	used := make(map[string]bool, len(facts.Tainted)+len(g))
	for n := range facts.Tainted {
		used[n] = true
	}
	for n := range g {
		used[n] = true
	}
	return used
}

// ruleNodes counts the nodes carrying (or granted) the taint of rule key.
func (g grants) ruleNodes(key string, facts NodeFacts) int {
	n := 0
	for node, keys := range facts.Tainted {
		if slices.Contains(keys, key) {
			n++
		} else if _, ok := g[node][key]; ok {
			n++
		}
	}
	for node, keys := range g {
		if _, inFacts := facts.Tainted[node]; inFacts {
			continue
		}
		if _, ok := keys[key]; ok {
			n++
		}
	}
	return n
}

// Taints is the budget's account of the taints decided and not yet seen in the
// facts (grants). Its methods take the Decider's lock, which it shares.
type Taints struct {
	mu     *sync.Mutex
	now    func() time.Time
	cfg    *Config
	grants grants
}

// Left is how many more nodes faultline may taint given facts: the budget
// minus the faultline-tainted nodes (those of the facts and those granted within
// PendingTTL).
func (t *Taints) Left(facts NodeFacts) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grants.expire(t.now(), t.cfg.PendingTTL)
	left := t.cfg.Budget(facts.Eligible) - len(t.grants.used(facts))
	return max(left, 0)
}

// Untainted tells the budget that the caller removed the taints of the rules keys
// ("pack/id"; all of faultline's taints when none is given) from node, after a
// recovery or `faultline untaint`: taints granted to it recently stop counting
// against the budgets at once instead of after PendingTTL. Call Release next.
func (t *Taints) Untainted(node string, keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grants.untaint(node, keys...)
}

// UntaintedBefore is Untainted for every taint of node granted before the time given: a caller
// that saw node tainted at t and untainted now frees what it saw removed, not the
// grants of taints decided since (still being placed).
func (t *Taints) UntaintedBefore(node string, before time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grants.untaintBefore(node, before)
}

// Granted says whether a taint of the rule key on node is granted: decided within
// PendingTTL and neither untainted nor failed since.
func (t *Taints) Granted(node, key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.grants[node][key]
	return ok && t.now().Sub(at) < t.cfg.PendingTTL // as expire would judge it, without a pass over every grant
}

// NotApplied tells the budget that the caller could not apply a KindTaint decision
// for f (an API error): the budget reserved for it is freed. The fault is not
// queued again; it comes back when the rule fires again.
func (t *Taints) NotApplied(f fault.Fault) {
	if f.Rule == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grants.untaint(f.Node, f.Rule.String())
}

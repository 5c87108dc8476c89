// Package correlate turns per-line rule hits into firings: it counts matches per
// node and rule within a window (thresholds), joins multi-line groups (a primary
// line and its companion in the same stream), and applies cooldowns.
//
// The controller and `faultline scan` share it, so a rule behaves the same on a
// live fleet and on a log file.
package correlate

import (
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// maxPending bounds the unmatched primaries/companions kept per stream and rule.
const maxPending = 32

// Outcome is what one rule did with the current line.
type Outcome struct {
	Rule     *rules.Compiled
	Captures map[string]string
	// Fired is set when the rule's action applies now: the threshold was reached
	// (and no cooldown holds it back). A match below its threshold is not fired.
	Fired bool
	// Count is the number of matches in the rule's window, this one included.
	Count int
	// Evidence holds the lines behind the outcome (the window's lines for a
	// threshold, both lines of a multi-line group), oldest first.
	Evidence []logstream.Line
}

// Action is the action this outcome takes now: the rule's action when fired, else none.
func (o Outcome) Action() rules.Action {
	if o.Fired {
		return o.Rule.Action
	}
	return rules.ActionNone
}

// Key identifies a stream: the node it comes from and the stream within the node
// (for example "kernel" or a pod container).
type Key struct {
	Node   string
	Stream string
}

// Correlator keeps the state of thresholds and multi-line groups. It is not safe for
// concurrent use; the caller serialises lines (per shard).
type Correlator struct {
	streams map[Key]*stream
	counts  map[countKey]*counter
}

type countKey struct {
	node string
	rule string
}

type counter struct {
	window        []logstream.Line
	cooldownUntil time.Time
}

type stream struct {
	lineNo  int64
	pending map[string]*pending // by rule id
}

type pending struct {
	primaries  []partial
	companions []partial
}

type partial struct {
	lineNo   int64
	ev       logstream.Line
	captures map[string]string
}

// New returns an empty Correlator.
func New() *Correlator {
	return &Correlator{streams: map[Key]*stream{}, counts: map[countKey]*counter{}}
}

// Observe feeds one line and the engine's hits on it; call it for every line of a
// stream (also those without hits) so multi-line distances count lines correctly.
func (c *Correlator) Observe(k Key, t time.Time, text string, hits []rules.Hit, dst []Outcome) []Outcome {
	st := c.streams[k]
	if st == nil {
		if len(hits) == 0 {
			return dst // nothing to remember for a stream that never matched
		}
		st = &stream{pending: map[string]*pending{}}
		c.streams[k] = st
	}
	st.lineNo++
	return c.observe(k, st, t, text, hits, dst)
}

// ObserveLine is Observe for a caller that numbers each stream's lines itself (one
// more for every line of the stream, hits or not): it needs calling only for lines
// with hits, which spares a look-up per line when whole files are read.
func (c *Correlator) ObserveLine(k Key, lineNo int64, t time.Time, text string, hits []rules.Hit, dst []Outcome) []Outcome {
	if len(hits) == 0 {
		return dst
	}
	st := c.streams[k]
	if st == nil {
		st = &stream{pending: map[string]*pending{}}
		c.streams[k] = st
	}
	st.lineNo = lineNo
	return c.observe(k, st, t, text, hits, dst)
}

func (c *Correlator) observe(k Key, st *stream, t time.Time, text string, hits []rules.Hit, dst []Outcome) []Outcome {
	ev := logstream.Line{Time: t, Text: text}
	for _, h := range hits {
		r := h.Rule
		if r.Companion == nil {
			if !h.Companion {
				dst = append(dst, c.count(k.Node, r, h.Captures, []logstream.Line{ev}))
			}
			continue
		}
		p := st.pending[r.ID]
		if p == nil {
			p = &pending{}
			st.pending[r.ID] = p
		}
		cur := partial{lineNo: st.lineNo, ev: ev, captures: h.Captures}
		cp := r.Companion
		if h.Companion {
			// A companion completes an earlier primary when the companion may come after it.
			if cp.Position != "before" {
				if i := closest(p.primaries, cur, cp); i >= 0 {
					prim := p.primaries[i]
					p.primaries = remove(p.primaries, i)
					dst = append(dst, c.count(k.Node, r, merge(prim.captures, h.Captures), []logstream.Line{prim.ev, ev}))
					continue
				}
			}
			p.companions = push(p.companions, cur)
			continue
		}
		if cp.Position != "after" {
			if i := closest(p.companions, cur, cp); i >= 0 {
				comp := p.companions[i]
				p.companions = remove(p.companions, i)
				dst = append(dst, c.count(k.Node, r, merge(comp.captures, h.Captures), []logstream.Line{comp.ev, ev}))
				continue
			}
		}
		p.primaries = push(p.primaries, cur)
	}
	return dst
}

// closest returns the newest partial within the companion's bounds of cur, or -1.
func closest(ps []partial, cur partial, cp *rules.CompiledCompanion) int {
	for i := len(ps) - 1; i >= 0; i-- {
		if within(ps[i], cur, cp) {
			return i
		}
	}
	return -1
}

func within(a, b partial, cp *rules.CompiledCompanion) bool {
	if cp.Lines > 0 && b.lineNo-a.lineNo > int64(cp.Lines) {
		return false
	}
	if cp.Duration > 0 {
		d := b.ev.Time.Sub(a.ev.Time)
		if d < 0 {
			d = -d
		}
		if d > cp.Duration {
			return false
		}
	}
	return true
}

func push(ps []partial, p partial) []partial {
	if len(ps) >= maxPending {
		ps = append(ps[:0], ps[1:]...)
	}
	return append(ps, p)
}

func remove(ps []partial, i int) []partial { return append(ps[:i], ps[i+1:]...) }

// merge returns the primary's captures over the companion's.
func merge(companion, primary map[string]string) map[string]string {
	out := make(map[string]string, len(companion)+len(primary))
	for k, v := range companion {
		out[k] = v
	}
	for k, v := range primary {
		out[k] = v
	}
	return out
}

// count applies the rule's threshold and cooldown to one complete match.
func (c *Correlator) count(node string, r *rules.Compiled, caps map[string]string, ev []logstream.Line) Outcome {
	t := ev[len(ev)-1].Time
	o := Outcome{Rule: r, Captures: caps}
	if r.Threshold.Count <= 1 && r.Cooldown <= 0 {
		o.Fired, o.Count, o.Evidence = true, 1, ev
		return o
	}
	k := countKey{node: node, rule: r.Pack + "/" + r.ID}
	ct := c.counts[k]
	if ct == nil {
		ct = &counter{}
		c.counts[k] = ct
	}
	ct.window = append(ct.window, ev...)
	if w := r.Threshold.Window.D(); w > 0 {
		cut := 0
		for cut < len(ct.window) && t.Sub(ct.window[cut].Time) > w {
			cut++
		}
		ct.window = ct.window[cut:]
	}
	// Keep only as many lines as the threshold needs; older ones cannot matter.
	need := r.Threshold.Count * len(ev)
	if need < 1 {
		need = 1
	}
	if len(ct.window) > need {
		ct.window = append(ct.window[:0], ct.window[len(ct.window)-need:]...)
	}
	o.Count = len(ct.window) / len(ev)
	o.Evidence = append([]logstream.Line(nil), ct.window...)
	if o.Count >= r.Threshold.Count && !t.Before(ct.cooldownUntil) {
		o.Fired = true
		ct.window = ct.window[:0]
		if r.Cooldown > 0 {
			ct.cooldownUntil = t.Add(r.Cooldown)
		}
	}
	return o
}

// Prune forgets state older than horizon before now: threshold windows that have
// run out and multi-line partials that can no longer complete. Call it
// periodically from a long-running process.
func (c *Correlator) Prune(now time.Time, horizon time.Duration) {
	for k, ct := range c.counts {
		if len(ct.window) == 0 && now.After(ct.cooldownUntil) {
			delete(c.counts, k)
			continue
		}
		if len(ct.window) > 0 && now.Sub(ct.window[len(ct.window)-1].Time) > horizon && now.After(ct.cooldownUntil) {
			delete(c.counts, k)
		}
	}
	for k, st := range c.streams {
		for id, p := range st.pending {
			p.primaries = prune(p.primaries, now, horizon)
			p.companions = prune(p.companions, now, horizon)
			if len(p.primaries) == 0 && len(p.companions) == 0 {
				delete(st.pending, id)
			}
		}
		if len(st.pending) == 0 {
			delete(c.streams, k)
		}
	}
}

func prune(ps []partial, now time.Time, horizon time.Duration) []partial {
	out := ps[:0]
	for _, p := range ps {
		if now.Sub(p.ev.Time) <= horizon {
			out = append(out, p)
		}
	}
	return out
}

// Package correlate turns per-line rule hits into firings: it counts matches per
// node and rule within a window (thresholds), joins multi-line groups (a primary
// line and its companions in the same stream), and applies cooldowns.
//
// The controller and `faultline scan` share it, so a rule behaves the same on a
// live fleet and on a log file.
package correlate

import (
	"maps"
	"math"
	"sort"
	"time"
	"unique"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// maxPending bounds the unmatched primaries (open groups) and the waiting lines of
// each companion kept per stream and rule.
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
	// threshold, every line of a multi-line group), oldest first.
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
	shared  bool // texts kept shared (NewShared)
}

type countKey struct {
	node string
	rule string
}

type counter struct {
	window        []seen
	cooldownUntil time.Time
}

// seen is a line as the correlator keeps it: its time and text, all that evidence
// needs (a logstream.Line is three times the size, and a fleet's waiting lines
// are many). The time is kept as Unix nanoseconds, 8 bytes where a time.Time is 24:
// lines wait by the hundred thousand.
type seen struct {
	at   int64
	Text string
}

func newSeen(t time.Time, text string) seen { return seen{at: stamp(t), Text: text} }

func (s seen) time() time.Time {
	if s.at == zeroStamp {
		return time.Time{}
	}
	return time.Unix(0, s.at)
}

func (s seen) line() logstream.Line { return logstream.Line{Time: s.time(), Text: s.Text} }

// zeroStamp stands for the zero time (a line without one), which has no Unix
// nanoseconds; times outside what they can hold (before 1678, after 2262) are
// clamped next to it and to the largest.
const zeroStamp = math.MinInt64

var minTime, maxTime = time.Unix(0, zeroStamp+1), time.Unix(0, math.MaxInt64)

func stamp(t time.Time) int64 {
	switch {
	case t.IsZero():
		return zeroStamp
	case t.Before(minTime):
		return zeroStamp + 1
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// lines is the evidence form of ss.
func lines(ss []seen) []logstream.Line {
	out := make([]logstream.Line, len(ss))
	for i, s := range ss {
		out[i] = s.line()
	}
	return out
}

type stream struct {
	lineNo int64
	// pending: one per rule with companions that matched in the stream. A stream
	// has one or two, and a slice of them is a tenth of a map's size: a fleet's
	// streams are many.
	pending []*pending
}

// find returns the stream's pending of rule id, or nil.
func (st *stream) find(id string) *pending {
	for _, p := range st.pending {
		if p.rule == id {
			return p
		}
	}
	return nil
}

// pending is what a rule with companions waits on in one stream.
type pending struct {
	rule string // the rule's id
	// groups: primaries waiting for some of their companions, oldest first.
	groups []group
	// companions[j]: lines of companion j seen before a primary took them.
	companions [][]partial
}

// group is a primary line and the companions it has so far (parts[j] is nil
// while companion j is missing).
type group struct {
	primary partial
	parts   []*partial
	missing int
}

type partial struct {
	lineNo   int64
	ev       seen
	captures map[string]string
}

// New returns an empty Correlator.
func New() *Correlator {
	return &Correlator{streams: map[Key]*stream{}, counts: map[countKey]*counter{}}
}

// NewShared returns an empty Correlator that keeps one copy of each distinct text
// of the lines it keeps (unique.Make, freed when no line holds it), for a
// long-running reader of a fleet's lines: its lines wait for minutes, and a fleet's
// nodes, alike in their hardware, print the same lines again and again (a port's
// link-up, a root port's corrected error); shared, each distinct text costs once,
// not once a line. A reader of one file does not gain what making them shared
// costs (`faultline scan` ran a third slower with it).
func NewShared() *Correlator {
	c := New()
	c.shared = true
	return c
}

// Observe feeds one line and the engine's hits on it; call it for every line of a
// stream (also those without hits) so multi-line distances count lines correctly.
func (c *Correlator) Observe(k Key, t time.Time, text string, hits []rules.Hit, dst []Outcome) []Outcome {
	st := c.streams[k]
	if st == nil {
		if len(hits) == 0 {
			return dst // nothing to remember for a stream that never matched
		}
		st = &stream{}
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
		st = &stream{}
		c.streams[k] = st
	}
	st.lineNo = lineNo
	return c.observe(k, st, t, text, hits, dst)
}

func (c *Correlator) observe(k Key, st *stream, t time.Time, text string, hits []rules.Hit, dst []Outcome) []Outcome {
	if c.shared {
		text = unique.Make(text).Value()
	}
	ev := newSeen(t, text)
	for _, h := range hits {
		r := h.Rule
		if len(r.Companions) == 0 {
			if !h.Companion {
				dst = append(dst, c.count(k.Node, r, h.Captures, []seen{ev}))
			}
			continue
		}
		if h.Companion && h.Part >= len(r.Companions) {
			continue
		}
		p := st.find(r.ID)
		if p == nil {
			p = &pending{rule: r.ID, companions: make([][]partial, len(r.Companions))}
			st.pending = append(st.pending, p)
		}
		cur := partial{lineNo: st.lineNo, ev: ev, captures: h.Captures}
		if h.Companion {
			// A companion joins an earlier primary when the companion may come after it.
			j := h.Part
			cp := r.Companions[j]
			if cp.Position != "before" {
				if i := openGroup(p.groups, j, cur, cp); i >= 0 {
					g := &p.groups[i]
					// Only a line that joins a group is kept by address: cur itself
					// stays off the heap (most companion lines wait in a list).
					joined := cur
					g.parts[j] = &joined
					if g.missing--; g.missing == 0 {
						done := p.groups[i]
						p.groups = append(p.groups[:i], p.groups[i+1:]...)
						dst = append(dst, c.complete(k.Node, r, done))
					}
					continue
				}
			}
			p.companions[j] = push(p.companions[j], cur)
			continue
		}
		// A primary takes the newest waiting line of each companion that may come
		// before it.
		g := group{primary: cur, parts: make([]*partial, len(r.Companions)), missing: len(r.Companions)}
		for j, cp := range r.Companions {
			if cp.Position == "after" {
				continue
			}
			if i := closest(p.companions[j], cur, cp); i >= 0 {
				comp := p.companions[j][i]
				p.companions[j] = remove(p.companions[j], i)
				g.parts[j] = &comp
				g.missing--
			}
		}
		if g.missing == 0 {
			dst = append(dst, c.complete(k.Node, r, g))
			continue
		}
		if len(p.groups) >= maxPending {
			p.groups = append(p.groups[:0], p.groups[1:]...)
		}
		p.groups = append(p.groups, g)
	}
	return dst
}

// complete counts a group that has all its lines: its captures are the
// companions' (in the rule's order) under the primary's, its evidence the lines in
// time order (stream order among lines of one time).
func (c *Correlator) complete(node string, r *rules.Compiled, g group) Outcome {
	parts := make([]partial, 0, len(g.parts)+1)
	caps := map[string]string{}
	for _, part := range g.parts {
		parts = append(parts, *part)
		maps.Copy(caps, part.captures)
	}
	maps.Copy(caps, g.primary.captures)
	parts = append(parts, g.primary)
	sort.SliceStable(parts, func(a, b int) bool {
		if ta, tb := parts[a].ev.at, parts[b].ev.at; ta != tb {
			return ta < tb
		}
		return parts[a].lineNo < parts[b].lineNo
	})
	ev := make([]seen, len(parts))
	for i, l := range parts {
		ev[i] = l.ev
	}
	return c.count(node, r, caps, ev)
}

// openGroup returns the newest group still missing companion j whose primary is
// within the companion's bounds of cur, or -1.
func openGroup(gs []group, j int, cur partial, cp *rules.CompiledCompanion) int {
	for i := len(gs) - 1; i >= 0; i-- {
		if gs[i].parts[j] == nil && within(gs[i].primary, cur, cp) {
			return i
		}
	}
	return -1
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

// within says whether a and the later b are within the companion's bounds.
func within(a, b partial, cp *rules.CompiledCompanion) bool {
	if cp.Lines > 0 && b.lineNo-a.lineNo > int64(cp.Lines) {
		return false
	}
	if cp.Duration > 0 {
		d := b.ev.time().Sub(a.ev.time())
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

// count applies the rule's threshold and cooldown to one complete match.
func (c *Correlator) count(node string, r *rules.Compiled, caps map[string]string, ev []seen) Outcome {
	t := ev[len(ev)-1].time()
	o := Outcome{Rule: r, Captures: caps}
	if r.Threshold.Count <= 1 && r.Cooldown <= 0 {
		o.Fired, o.Count, o.Evidence = true, 1, lines(ev)
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
		for cut < len(ct.window) && t.Sub(ct.window[cut].time()) > w {
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
	o.Evidence = lines(ct.window)
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
		if len(ct.window) > 0 && now.Sub(ct.window[len(ct.window)-1].time()) > horizon && now.After(ct.cooldownUntil) {
			delete(c.counts, k)
		}
	}
	for k, st := range c.streams {
		kept := st.pending[:0]
		for _, p := range st.pending {
			// A group is as old as its primary: its companions are bound to it.
			gs := p.groups[:0]
			for _, g := range p.groups {
				if now.Sub(g.primary.ev.time()) <= horizon {
					gs = append(gs, g)
				}
			}
			clear(p.groups[len(gs):]) // their lines are garbage
			p.groups = gs
			empty := len(p.groups) == 0
			for j := range p.companions {
				p.companions[j] = prune(p.companions[j], now, horizon)
				empty = empty && len(p.companions[j]) == 0
			}
			if !empty {
				kept = append(kept, p)
			}
		}
		clear(st.pending[len(kept):])
		st.pending = kept
		if len(st.pending) == 0 {
			delete(c.streams, k)
		}
	}
}

func prune(ps []partial, now time.Time, horizon time.Duration) []partial {
	out := ps[:0]
	for _, p := range ps {
		if now.Sub(p.ev.time()) <= horizon {
			out = append(out, p)
		}
	}
	clear(ps[len(out):]) // their lines are garbage
	return out
}

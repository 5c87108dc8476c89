package controller

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline-dev/faultline/controller/intake"
	"github.com/faultline-dev/faultline/logstream"
)

// lineDedupe remembers the lines a rule's pattern matched, from either path (the
// collector's push and Loki's reading), so the path that delivers a line second
// skips it: each line is decided once however it arrives. A line is known by its
// node, time and text; its stream labels are not part of the key, as the two paths
// spell them differently. Lines no pattern matches are not remembered: deciding one
// twice changes nothing.
//
// Memory is bounded by time: keys live in two generations of window each, so a line
// is remembered for window to twice window after it was added; the Loki reading
// follows within seconds, and a line read back later (a restart's catch-up) is
// decided again as it was before the push path existed. A generation past maxKeys is
// started over. Not safe for concurrent use: the lineGate's lock serialises it.
type lineDedupe struct {
	seed   maphash.Seed
	window time.Duration
	now    func() time.Time

	cur, prev map[uint64]struct{}
	curSince  time.Time
}

// Defaults of the pipeline's lineDedupe.
const (
	dedupeWindow  = 2 * time.Minute
	dedupeMaxKeys = 1 << 20
)

func newLineDedupe(window time.Duration, now func() time.Time) *lineDedupe {
	return &lineDedupe{seed: maphash.MakeSeed(), window: window, now: now,
		cur: map[uint64]struct{}{}, prev: map[uint64]struct{}{}, curSince: now()}
}

func (d *lineDedupe) key(l logstream.Line) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(l.Node)
	h.WriteByte(0)
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(l.Time.UnixNano())))
	h.WriteString(l.Text)
	return h.Sum64()
}

// seen reports whether l was added within the window.
func (d *lineDedupe) seen(l logstream.Line) bool {
	k := d.key(l)
	d.rotate()
	if _, ok := d.cur[k]; ok {
		return true
	}
	_, ok := d.prev[k]
	return ok
}

// add remembers l.
func (d *lineDedupe) add(l logstream.Line) {
	k := d.key(l)
	d.rotate()
	if len(d.cur) >= dedupeMaxKeys {
		d.prev, d.cur, d.curSince = d.cur, map[uint64]struct{}{}, d.now()
	}
	d.cur[k] = struct{}{}
}

func (d *lineDedupe) rotate() {
	now := d.now()
	if now.Sub(d.curSince) < d.window {
		return
	}
	if now.Sub(d.curSince) >= 2*d.window {
		d.prev = map[uint64]struct{}{}
	} else {
		d.prev = d.cur
	}
	d.cur, d.curSince = map[uint64]struct{}{}, now
}

// lineGate lets the lines of both paths into the pipeline one at a time, each once.
type lineGate struct {
	st      stages
	dedupe  *lineDedupe
	earlier func(logstream.Line) bool // a line of an earlier boot of its node

	mu sync.Mutex
}

// read decides a line Loki's reading delivered.
func (g *lineGate) read(ctx context.Context, l logstream.Line) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.decide(ctx, l, "loki")
}

// push decides the lines of one push, in order; a push reaching a pipeline that has
// stopped is refused, and the collector's retry reaches the next one.
func (g *lineGate) push(ctx context.Context, lines []logstream.Line) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range lines {
		if err := ctx.Err(); err != nil {
			return err
		}
		if g.earlier(l) {
			continue
		}
		if err := g.decide(ctx, l, "intake"); err != nil {
			return err
		}
	}
	return nil
}

func (g *lineGate) decide(ctx context.Context, l logstream.Line, path string) error {
	if g.dedupe.seen(l) {
		g.st.m.duplicateLines.WithLabelValues(path).Inc()
		return nil
	}
	hit, err := g.st.process(ctx, l)
	if hit {
		g.dedupe.add(l)
	}
	return err
}

// intakeDoor hands pushed lines to the term's gate while this replica leads.
type intakeDoor struct {
	mu       sync.Mutex
	open     func([]logstream.Line) error // nil while not leading
	pushedAt atomic.Int64                 // Unix ns of the last push decided
}

// backstopAfter: Loki's reading is the backstop (its polls need not hurry) while a
// push was decided within this long.
const backstopAfter = 10 * time.Second

func (d *intakeDoor) set(open func([]logstream.Line) error) {
	d.mu.Lock()
	d.open = open
	d.mu.Unlock()
}

func (d *intakeDoor) push(ctx context.Context, lines []logstream.Line) error {
	d.mu.Lock()
	open := d.open
	d.mu.Unlock()
	if open == nil {
		return intake.ErrNotLeading
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := open(lines); err != nil {
		return err
	}
	d.pushedAt.Store(time.Now().UnixNano())
	return nil
}

// pushing reports whether the collector pushes lines (see backstopAfter).
func (d *intakeDoor) pushing() bool {
	return time.Since(time.Unix(0, d.pushedAt.Load())) < backstopAfter
}

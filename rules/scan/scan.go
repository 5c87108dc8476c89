// Package scan runs rule packs over log files, without a cluster: the engine of
// `faultline scan`. Windows use each line's own time when its prefix has one, and
// each host of a merged syslog is a node of its own, so thresholds and multi-line
// groups behave as they do in the controller.
package scan

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/correlate"
	"github.com/faultline-dev/faultline/rules/logline"
)

// MaxLineBytes caps one input line; the rest of a longer line is skipped and counted.
const MaxLineBytes = 1 << 20

// MaxStreams caps the streams (input and node pairs) a scan keeps state for; lines
// of further hosts are counted with their input's hostless lines, and counted.
const MaxStreams = 100_000

// Match is one reported match, the JSON object of `--format jsonl`.
type Match struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Node string `json:"node"`
	// Time is the line's own calendar time (RFC 3339), when its prefix has one.
	Time     string         `json:"time,omitempty"`
	Pack     string         `json:"pack"`
	Rule     string         `json:"rule"`
	Severity rules.Severity `json:"severity"`
	Action   rules.Action   `json:"action"`
	// Mode is the rule's mode as the packs set it (observe, annotate, enforce): how
	// far the controller would let Action go (a controller's --max-mode may lower it).
	Mode     rules.Mode        `json:"mode"`
	Captures map[string]string `json:"captures"`
	Text     string            `json:"text"`
	// Lines are the messages of a multi-line group (a rule with companions), in
	// time order; Text is the line that completed it.
	Lines []string `json:"lines,omitempty"`
}

// NodeFrom says what a line's node is.
type NodeFrom string

// Ways to name a line's node.
const (
	// NodeFromHost: the host of the line's syslog or journal prefix; lines without
	// one belong to the default node. Each host of a merged syslog is its own stream.
	NodeFromHost NodeFrom = "host"
	// NodeFromFile: every line of an input belongs to one node named after the input.
	NodeFromFile NodeFrom = "file"
	// NodeFromNone: every line of every input belongs to the default node.
	NodeFromNone NodeFrom = "none"
)

// Options tune a scan.
type Options struct {
	// Source forces every line's source (kernel or pod); empty guesses from the
	// line's prefix and lets rules of every source apply when it cannot tell.
	Source rules.Source
	// NodeFrom names each line's node; empty means NodeFromHost.
	NodeFrom NodeFrom
	// Node names the lines without a host. Unset, they are counted per input and
	// reported with an empty node.
	Node string
	// Year is the year of syslog dates, which name none (a date earlier than the
	// one before it by more than half a year starts the next year).
	Year int
	// Workers parse and match lines in parallel; 0 means DefaultWorkers, 1 reads
	// and matches on the calling goroutine.
	Workers int
}

// Stats summarise a scan.
type Stats struct {
	Lines     int
	Truncated int
	// Untimed counts lines that carry no time of their own; in a stream that never
	// had one, lines are taken to be one second apart.
	Untimed int
	// Merged counts lines whose host found no room under MaxStreams.
	Merged  int
	PerRule map[*rules.Compiled]*RuleStats
	// Fired counts the firings at each level of --fail-on.
	Fired map[FailOn]int
}

// RuleStats counts one rule's matches and firings.
type RuleStats struct {
	Matches int
	Fired   int
}

// Scanner scans inputs with one engine; thresholds and multi-line groups span its
// inputs (rotated files of one host), per node.
type Scanner struct {
	engine    *rules.Engine
	opts      Options
	corr      *correlate.Correlator
	streams   map[streamKey]*stream
	rebootGap time.Duration
	Stats     Stats
}

// streamKey identifies a stream: the input and the node's identity.
type streamKey struct{ input, node string }

// New returns a Scanner.
func New(e *rules.Engine, o Options) *Scanner {
	if o.NodeFrom == "" {
		o.NodeFrom = NodeFromHost
	}
	return &Scanner{
		engine:    e,
		opts:      o,
		corr:      correlate.New(),
		streams:   map[streamKey]*stream{},
		rebootGap: rebootGap(e.Set()),
		Stats:     Stats{PerRule: map[*rules.Compiled]*RuleStats{}, Fired: map[FailOn]int{}},
	}
}

// DefaultWorkers is the number of goroutines that parse and match lines: with
// fewer than four CPUs one, since handing chunks between goroutines costs more CPU
// than it saves when no core is idle; else one per CPU but one, at most four (the
// in-order side is then what limits).
func DefaultWorkers() int {
	n := runtime.GOMAXPROCS(0)
	if n < 4 {
		return 1
	}
	return min(n-1, 4)
}

// rebootGap is the time put between two boots of a node in a log with seconds since
// boot: longer than any rule's window, so no window spans a reboot.
func rebootGap(set *rules.Set) time.Duration {
	gap := time.Hour
	for _, r := range set.Rules {
		gap = max(gap, r.Threshold.Window.D()+time.Minute)
		for _, cp := range r.Companions {
			gap = max(gap, cp.Duration+time.Minute)
		}
	}
	return gap
}

// Scan reads r line by line and calls emit for every match, in input order. The
// input's name is r's Name() (an *os.File's path), or "-". Lines are parsed and
// matched on Options.Workers goroutines; windows, streams and output follow the
// input's order.
func (s *Scanner) Scan(ctx context.Context, r io.Reader, emit func(Match) error) error {
	input := "-"
	if n, ok := r.(interface{ Name() string }); ok {
		input = n.Name()
	}
	// Lines without a host belong to --node; unnamed, to the input (or, with
	// NodeFromNone, to one nameless node).
	c := &consumer{input: input, defNode: s.opts.Node, defID: s.opts.Node, emit: emit}
	if c.defID == "" && s.opts.NodeFrom != NodeFromNone {
		c.defID = input
	}
	workers := s.opts.Workers
	if workers <= 0 {
		workers = DefaultWorkers()
	}
	if workers > 1 {
		return s.scanParallel(ctx, r, c, workers)
	}
	lr := lineReader{br: bufio.NewReaderSize(r, 256<<10)}
	var l line
	w := s.newWorker()
	for {
		if c.lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		b, err := lr.next()
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read line %d: %w", c.lineNo+1, err)
		}
		if len(b) == 0 && err != nil {
			return nil
		}
		s.prepare(w, b, lr.truncated, &l)
		if err := s.consume(c, &l); err != nil {
			return err
		}
		if err != nil {
			return nil // io.EOF after the last line
		}
	}
}

// line is one input line, parsed and matched (possibly on another goroutine than
// the one that consumes it).
type line struct {
	// text is the line without its end; it is the read buffer's bytes unless the
	// line has hits, whose lines are copied since the output keeps them.
	text      string
	p         logline.Parsed
	hits      []rules.Hit
	msg       string // a copy of p.Message when the line has hits
	truncated bool
}

// worker is what one goroutine that parses and matches lines keeps between them.
type worker struct {
	pr logline.Parser
	m  *rules.Matcher
}

func (s *Scanner) newWorker() *worker { return &worker{m: s.engine.Matcher()} }

// prepare parses and matches one line in place; only a line with hits is copied,
// with its captures.
func (s *Scanner) prepare(w *worker, b []byte, truncated bool, l *line) {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	if len(b) > MaxLineBytes {
		b, truncated = b[:MaxLineBytes], true
	}
	l.text = unsafe.String(unsafe.SliceData(b), len(b))
	l.truncated = truncated
	w.pr.Parse(l.text, &l.p)
	l.hits, l.msg = l.hits[:0], ""
	if l.p.Continuation {
		return
	}
	src := s.opts.Source
	if src == "" {
		src = rules.Source(l.p.Origin)
	}
	l.hits = w.m.Match(&logstream.Line{Text: l.p.Message, Source: string(src)}, l.hits)
	if len(l.hits) > 0 {
		text := strings.Clone(l.text)
		l.p.Message = rebase(l.p.Message, l.text, text)
		l.p.Program = rebase(l.p.Program, l.text, text)
		l.p.Host = rebase(l.p.Host, l.text, text)
		for _, h := range l.hits {
			for k, v := range h.Captures {
				h.Captures[k] = rebase(v, l.text, text) // in the copy: no copy each
			}
		}
		l.text, l.msg = text, l.p.Message
	}
}

// rebase returns the part of clone (a copy of orig) that sub is of orig, or a copy
// of sub when it is no part of orig: the fields of a parsed line kept past the read
// buffer's reuse, without parsing the line again.
func rebase(sub, orig, clone string) string {
	if sub == "" {
		return ""
	}
	off := uintptr(unsafe.Pointer(unsafe.StringData(sub))) - uintptr(unsafe.Pointer(unsafe.StringData(orig)))
	if off > uintptr(len(orig)) || uintptr(len(sub)) > uintptr(len(orig))-off {
		return strings.Clone(sub)
	}
	return clone[off : off+uintptr(len(sub))]
}

// consumer is the in-order side of a scan: streams, clocks, correlation, output.
type consumer struct {
	input, defNode, defID string
	lineNo                int
	// byHost caches streams of this input by a hash of the node's identity (its
	// length and last byte: "gpu-001" to "gpu-004" of a merged syslog each get a
	// slot of their own), so the line of another host than the line before costs
	// one comparison of names, not a lookup in the scanner's map.
	byHost [16]*stream
	outs   []correlate.Outcome
	emit   func(Match) error
}

func (s *Scanner) consume(c *consumer, l *line) error {
	c.lineNo++
	s.Stats.Lines++
	if l.truncated {
		s.Stats.Truncated++
	}
	p := &l.p
	if p.Continuation {
		return nil
	}
	node, id := c.defNode, c.defID
	switch {
	case s.opts.NodeFrom == NodeFromHost && p.Host != "":
		node, id = p.Host, p.Host
	case s.opts.NodeFrom == NodeFromFile:
		node, id = c.input, c.input
	}
	slot := hostSlot(id)
	st := c.byHost[slot]
	if st == nil || st.key.node != id || st.key.input != c.input {
		if st = s.stream(c.input, id, node, false); st == nil {
			s.Stats.Merged++
			st = s.stream(c.input, c.defID, c.defNode, true)
		}
		if st.key.node == id {
			c.byHost[slot] = st // not a merged line's: it is another node's
		}
	}
	st.observe(p, s.rebootGap)
	if p.Clock == logline.ClockNone {
		s.Stats.Untimed++
	}
	var t time.Time
	if len(l.hits) > 0 {
		t = st.now(s.opts.Year)
	}
	c.outs = s.corr.ObserveLine(st.corrKey, st.lines, t, l.msg, l.hits, c.outs[:0])
	for _, o := range c.outs {
		if err := s.report(o, c.input, c.lineNo, st, p, l.text, c.emit); err != nil {
			return err
		}
	}
	return nil
}

// hostSlot is the slot of a node's identity in consumer.byHost.
func hostSlot(id string) int {
	if id == "" {
		return 0
	}
	return (len(id)*7 + int(id[len(id)-1])) & 15
}

// lineReader reads lines in place, without copying them.
type lineReader struct {
	br        *bufio.Reader
	long      []byte
	truncated bool
}

// next returns the next line, valid until the next call, at most MaxLineBytes+1
// long (truncated says when more was skipped), and io.EOF with the input's last line.
func (lr *lineReader) next() ([]byte, error) {
	lr.truncated = false
	b, err := lr.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return b, err
	}
	// Longer than the buffer: gather it.
	lr.long = append(lr.long[:0], b...)
	for errors.Is(err, bufio.ErrBufferFull) {
		b, err = lr.br.ReadSlice('\n')
		room := MaxLineBytes + 1 - len(lr.long) // prepare cuts what is over
		if len(b) > room {
			lr.truncated = true
			b = b[:max(room, 0)]
		}
		lr.long = append(lr.long, b...)
	}
	return lr.long, err
}

// stream returns the stream of a node (identified by id, shown as node) in an input,
// or nil when it is new and MaxStreams are kept already (unless force). Lines reach
// it only when their consumer's cache (consumer.byHost) misses.
func (s *Scanner) stream(input, id, node string, force bool) *stream {
	k := streamKey{input, id}
	st := s.streams[k]
	if st == nil {
		if len(s.streams) >= MaxStreams && !force {
			return nil
		}
		// The line's bytes are reused: keep a copy of the node's name. The input's
		// name is no line's (a file's name): the very string, so comparing it with
		// the next line's input finds the same pointer and reads no bytes.
		k = streamKey{input, strings.Clone(id)}
		// The correlator hashes its key on every line: the stream is named by a
		// short number rather than the input's path.
		st = &stream{key: k, node: strings.Clone(node), corrKey: correlate.Key{Node: k.node, Stream: strconv.Itoa(len(s.streams))}}
		s.streams[k] = st
	}
	return st
}

func (s *Scanner) report(o correlate.Outcome, input string, lineNo int, st *stream, p *logline.Parsed, raw string, emit func(Match) error) error {
	r := o.Rule
	rs := s.Stats.PerRule[r]
	if rs == nil {
		rs = &RuleStats{}
		s.Stats.PerRule[r] = rs
	}
	rs.Matches++
	if o.Fired {
		rs.Fired++
		for _, lv := range failLevels {
			if lv.reached(r) {
				s.Stats.Fired[lv]++
			}
		}
	}
	caps := o.Captures
	if caps == nil {
		caps = map[string]string{}
	}
	m := Match{File: input, Line: lineNo, Node: st.node, Pack: r.Pack, Rule: r.ID, Severity: r.Severity,
		Action: o.Action(), Mode: r.Mode, Captures: caps, Text: raw}
	if n := len(r.Companions) + 1; n > 1 && len(o.Evidence) >= n {
		for _, l := range o.Evidence[len(o.Evidence)-n:] {
			m.Lines = append(m.Lines, l.Text)
		}
	}
	if p.Clock == logline.ClockWall || p.Clock == logline.ClockWallNoYear {
		m.Time = st.now(s.opts.Year).Format(time.RFC3339Nano)
	}
	return emit(m)
}

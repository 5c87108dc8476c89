// Package scan runs rule packs over log files, without a cluster: the engine of
// `faultline scan`. Each input is one stream of one node, so thresholds and
// multi-line groups behave as they do in the controller.
package scan

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/correlate"
	"github.com/faultline-dev/faultline/rules/logline"
)

// MaxLineBytes caps one input line; the rest of a longer line is skipped and counted.
const MaxLineBytes = 1 << 20

// Match is one reported match, the JSON object of `--format jsonl`.
type Match struct {
	Line     int               `json:"line"`
	Pack     string            `json:"pack"`
	Rule     string            `json:"rule"`
	Severity rules.Severity    `json:"severity"`
	Action   rules.Action      `json:"action"`
	Captures map[string]string `json:"captures"`
	Text     string            `json:"text"`
}

// Options tune a scan.
type Options struct {
	// Source forces every line's source (kernel or pod); empty guesses from the
	// line's prefix and lets rules of every source apply when it cannot tell.
	Source rules.Source
}

// Stats summarise a scan.
type Stats struct {
	Lines     int
	Truncated int
	PerRule   map[*rules.Compiled]*RuleStats
}

// RuleStats counts one rule's matches and firings.
type RuleStats struct {
	Matches int
	Fired   int
}

// Scanner scans inputs with one engine.
type Scanner struct {
	engine *rules.Engine
	opts   Options
	Stats  Stats
}

// New returns a Scanner.
func New(e *rules.Engine, o Options) *Scanner {
	return &Scanner{engine: e, opts: o, Stats: Stats{PerRule: map[*rules.Compiled]*RuleStats{}}}
}

// Scan reads r line by line and calls emit for every match, in input order.
func (s *Scanner) Scan(ctx context.Context, r io.Reader, emit func(Match) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	corr := correlate.New()
	key := correlate.Key{Stream: "input"}
	var hits []rules.Hit
	var outs []correlate.Outcome
	lineNo := 0
	start := time.Unix(0, 0).UTC()
	for {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		raw, truncated, err := readLine(br)
		if errors.Is(err, io.EOF) && raw == "" {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read line %d: %w", lineNo+1, err)
		}
		lineNo++
		s.Stats.Lines++
		if truncated {
			s.Stats.Truncated++
		}
		p := logline.Parse(raw)
		if p.Continuation {
			continue
		}
		src := s.opts.Source
		if src == "" {
			src = rules.Source(p.Origin)
		}
		hits = s.engine.Match(rules.Line{Text: p.Message, Source: src}, hits[:0])
		// Files carry no reliable clock, so lines are one second apart: a threshold
		// window of 10m spans 600 lines of the file.
		outs = corr.Observe(key, start.Add(time.Duration(lineNo)*time.Second), p.Message, hits, outs[:0])
		for _, o := range outs {
			st := s.Stats.PerRule[o.Rule]
			if st == nil {
				st = &RuleStats{}
				s.Stats.PerRule[o.Rule] = st
			}
			st.Matches++
			if o.Fired {
				st.Fired++
			}
			caps := o.Captures
			if caps == nil {
				caps = map[string]string{}
			}
			m := Match{Line: lineNo, Pack: o.Rule.Pack, Rule: o.Rule.ID, Severity: o.Rule.Severity,
				Action: o.Action(), Captures: caps, Text: raw}
			if err := emit(m); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// readLine returns the next line without its newline, at most MaxLineBytes long.
func readLine(br *bufio.Reader) (string, bool, error) {
	var b []byte
	truncated := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(b)+len(chunk) <= MaxLineBytes {
			b = append(b, chunk...)
		} else {
			truncated = true
		}
		if err != nil {
			return string(b), truncated, err
		}
		if !isPrefix {
			return string(b), truncated, nil
		}
	}
}

// JSONLWriter returns an emit function writing one JSON object per line.
func JSONLWriter(w io.Writer) func(Match) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return func(m Match) error { return enc.Encode(m) }
}

// TextWriter prints matches as an aligned table; call the returned flush at the end.
func TextWriter(w io.Writer) (emit func(Match) error, flush func() error) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	emit = func(m Match) error {
		if !header {
			fmt.Fprintln(tw, "LINE\tSEVERITY\tACTION\tRULE\tCAPTURES\tTEXT")
			header = true
		}
		_, err := fmt.Fprintf(tw, "%d\t%s\t%s\t%s/%s\t%s\t%s\n", m.Line, m.Severity, m.Action, m.Pack, m.Rule,
			fmtCaptures(m.Captures), clip(m.Text, 100))
		return err
	}
	return emit, tw.Flush
}

// WriteSummary prints one row per rule that matched, most severe first.
func (s *Scanner) WriteSummary(w io.Writer) error {
	type row struct {
		r  *rules.Compiled
		st *RuleStats
	}
	var rows []row
	for r, st := range s.Stats.PerRule {
		rows = append(rows, row{r, st})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.r.Severity.Rank() != b.r.Severity.Rank() {
			return a.r.Severity.Rank() > b.r.Severity.Rank()
		}
		if a.st.Matches != b.st.Matches {
			return a.st.Matches > b.st.Matches
		}
		return a.r.String() < b.r.String()
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nscanned %d lines", s.Stats.Lines)
	if s.Stats.Truncated > 0 {
		fmt.Fprintf(tw, " (%d longer than %d bytes, truncated)", s.Stats.Truncated, MaxLineBytes)
	}
	fmt.Fprintf(tw, "; %d rules matched\n", len(rows))
	if len(rows) == 0 {
		return tw.Flush()
	}
	fmt.Fprintln(tw, "RULE\tSEVERITY\tACTION\tMATCHES\tFIRED\tDESCRIPTION")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.r, r.r.Severity, r.r.Action, r.st.Matches, r.st.Fired, clip(r.r.Description, 70))
	}
	return tw.Flush()
}

func fmtCaptures(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

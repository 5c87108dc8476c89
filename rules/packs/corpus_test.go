package packs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
	"github.com/faultline-dev/faultline/rules/scan"
)

// corpusPacksEnv names a pack directory to measure instead of the embedded default
// packs, so a pack rewrite can be judged on the corpus before it replaces them.
const corpusPacksEnv = "FAULTLINE_CORPUS_PACKS"

// Thresholds the packs must meet on the corpus.
const (
	minEventRecall  = 0.95
	maxFalseAlarmPc = 0.01
)

type corpusLine struct {
	Label    string `json:"label"`
	XidCode  string `json:"xid_code"`
	Polarity string `json:"polarity"`
	Source   string `json:"source"`
	RawLine  string `json:"raw_line"`
	// Group is shared by the lines of one multi-line event, kept in order.
	Group string `json:"group"`

	n int // 1-based line number in the corpus file
}

// class is the label, with the code for Xid and SXid lines: recall per Xid family.
func (c corpusLine) class() string {
	if c.Label == "xid" || c.Label == "sxid" {
		return c.Label + " " + c.XidCode
	}
	return c.Label
}

// corpusEvent is one fault or benign occurrence: a single line, or the lines of
// one group.
type corpusEvent []corpusLine

func loadCorpus(t *testing.T) []corpusLine {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "corpus", "kernel-and-pod-lines.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c corpusLine
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		c.n = len(out) + 1
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// corpusEvents splits the corpus into events. A group's lines must be adjacent and
// agree on label and polarity, or the per-event figures would mean nothing.
func corpusEvents(t *testing.T, lines []corpusLine) []corpusEvent {
	t.Helper()
	var evs []corpusEvent
	closed := map[string]bool{}
	for _, c := range lines {
		if c.Group != "" && len(evs) > 0 {
			last := evs[len(evs)-1]
			if last[0].Group == c.Group {
				if last[0].Label != c.Label || last[0].Polarity != c.Polarity {
					t.Errorf("corpus line %d: group %s mixes %s/%s with %s/%s", c.n, c.Group, last[0].Label, last[0].Polarity, c.Label, c.Polarity)
				}
				evs[len(evs)-1] = append(last, c)
				continue
			}
		}
		if c.Group != "" {
			if closed[c.Group] {
				t.Errorf("corpus line %d: group %s is split; keep a group's lines together", c.n, c.Group)
			}
			closed[c.Group] = true
		}
		evs = append(evs, corpusEvent{c})
	}
	return evs
}

func corpusEngine(t testing.TB) *rules.Engine {
	t.Helper()
	dir := os.Getenv(corpusPacksEnv)
	if dir == "" {
		e, err := packs.Engine()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ps, err := rules.LoadPaths(dir)
	if err != nil {
		t.Fatalf("%s=%s: %v", corpusPacksEnv, dir, err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatalf("%s=%s: %v", corpusPacksEnv, dir, err)
	}
	t.Logf("measuring the packs in %s", dir)
	return rules.NewEngine(set)
}

// scanEvent runs one event's lines through a fresh scanner, so a group is read as
// the kernel printed it and no state leaks between events. Matches are indexed by
// the event's line (0-based).
func scanEvent(t *testing.T, e *rules.Engine, ev corpusEvent) [][]scan.Match {
	t.Helper()
	var text strings.Builder
	for _, c := range ev {
		text.WriteString(c.RawLine)
		text.WriteByte('\n')
	}
	per := make([][]scan.Match, len(ev))
	err := scan.New(e, scan.Options{}).Scan(context.Background(), strings.NewReader(text.String()), func(m scan.Match) error {
		if m.Line < 1 || m.Line > len(ev) {
			return fmt.Errorf("match on line %d of a %d-line event", m.Line, len(ev))
		}
		per[m.Line-1] = append(per[m.Line-1], m)
		return nil
	})
	if err != nil {
		t.Fatalf("corpus line %d: %v", ev[0].n, err)
	}
	return per
}

// recall counts events and lines of one class, and how many of each were found.
type recall struct{ events, eventHits, lines, lineHits int }

func (r recall) String() string {
	return fmt.Sprintf("events %3d/%-3d %.2f  lines %3d/%-3d %.2f", r.eventHits, r.events,
		ratio(r.eventHits, r.events), r.lineHits, r.lines, ratio(r.lineHits, r.lines))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// TestCorpusQuality measures the packs on real lines: recall per event (a
// multi-line group counts once, found when any of its lines is) and per line, per
// class; matches at warning or above on benign lines; no taint on a benign line or
// an application Xid; and the xid capture on every Xid line. Set
// FAULTLINE_CORPUS_PACKS to a pack directory to measure other packs.
func TestCorpusQuality(t *testing.T) {
	e := corpusEngine(t)
	byID := map[string]*rules.Compiled{}
	for _, r := range e.Set().Rules {
		byID[r.Pack+"/"+r.ID] = r
	}
	appXid := map[string]bool{"13": true, "31": true, "43": true, "45": true}
	perClass := map[string]*recall{}
	var total recall
	var benign, falseAlarms int
	for _, ev := range corpusEvents(t, loadCorpus(t)) {
		per := scanEvent(t, e, ev)
		found := false
		xidEvent, xidCaptured := "", false
		cl := perClass[ev[0].class()]
		if cl == nil && ev[0].Polarity == "positive" {
			cl = &recall{}
			perClass[ev[0].class()] = cl
		}
		for i, c := range ev {
			ms := per[i]
			warnOrAbove := false
			for _, m := range ms {
				r := byID[m.Pack+"/"+m.Rule]
				if m.Severity != rules.SeverityInfo {
					warnOrAbove = true
				}
				taints := m.Action == rules.ActionTaint || r.Action == rules.ActionTaint
				if taints && c.Polarity == "negative" {
					t.Errorf("corpus line %d (negative %s): rule %s would taint: %s", c.n, c.Label, r, c.RawLine)
				}
				if taints && c.Label == "xid" && appXid[c.XidCode] {
					t.Errorf("corpus line %d (application Xid %s): rule %s would taint: %s", c.n, c.XidCode, r, c.RawLine)
				}
			}
			switch c.Polarity {
			case "positive":
				cl.lines++
				total.lines++
				if len(ms) > 0 {
					cl.lineHits++
					total.lineHits++
					found = true
				}
			case "negative":
				benign++
				if warnOrAbove {
					falseAlarms++
					t.Logf("benign line %d (%s) matched at warning or above by %s/%s: %s", c.n, c.Label, ms[0].Pack, ms[0].Rule, c.RawLine)
				}
			}
			if c.Label == "xid" || c.Label == "sxid" {
				want, key := c.XidCode, "xid"
				if c.Label == "sxid" {
					want, key = strings.TrimPrefix(c.XidCode, "S"), "sxid"
				}
				xidEvent = key + "=" + want
				for _, m := range ms {
					if m.Captures[key] == want {
						xidCaptured = true
					}
				}
			}
		}
		// An Xid or SXid event (one line, or a banner with its dump) must yield
		// its code as a capture on some line: continuation lines of a dump do
		// not repeat the code.
		if xidEvent != "" && !xidCaptured {
			t.Errorf("corpus line %d: no match captures %s: %s", ev[0].n, xidEvent, ev[0].RawLine)
		}
		if ev[0].Polarity != "positive" {
			continue
		}
		cl.events++
		total.events++
		if found {
			cl.eventHits++
			total.eventHits++
			continue
		}
		for _, c := range ev {
			t.Logf("missed %s event at line %d: %s", ev[0].class(), c.n, c.RawLine)
		}
	}
	classes := make([]string, 0, len(perClass))
	for k := range perClass {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	for _, k := range classes {
		t.Logf("recall %-36s %s", k, perClass[k])
	}
	eventRecall := ratio(total.eventHits, total.events)
	alarmRate := ratio(falseAlarms, benign)
	t.Logf("recall over %d classes: %s", len(classes), total)
	t.Logf("benign lines matched at warning or above: %d/%d %.3f", falseAlarms, benign, alarmRate)
	if eventRecall < minEventRecall {
		t.Errorf("event recall %.3f < %.2f", eventRecall, minEventRecall)
	}
	if alarmRate > maxFalseAlarmPc {
		t.Errorf("benign lines matched at warning or above: %.3f > %.2f", alarmRate, maxFalseAlarmPc)
	}
}

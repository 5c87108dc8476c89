package packs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
	"github.com/faultline-dev/faultline/rules/scan"
)

type corpusLine struct {
	Label    string `json:"label"`
	XidCode  string `json:"xid_code"`
	Polarity string `json:"polarity"`
	Source   string `json:"source"`
	RawLine  string `json:"raw_line"`
}

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
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func defaultEngine(t testing.TB) *rules.Engine {
	t.Helper()
	e, err := packs.Engine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// scanOne runs one line alone through the scanner (fresh state).
func scanOne(t *testing.T, e *rules.Engine, line string) []scan.Match {
	t.Helper()
	var ms []scan.Match
	err := scan.New(e, scan.Options{}).Scan(context.Background(), strings.NewReader(line), func(m scan.Match) error {
		ms = append(ms, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestCorpusQuality measures the default packs on real lines: recall on positive
// lines, matches at warning or above on negative lines, no taint on negative lines
// or application Xids, and the xid capture on every Xid line.
func TestCorpusQuality(t *testing.T) {
	e := defaultEngine(t)
	byID := map[string]*rules.Compiled{}
	for _, r := range e.Set().Rules {
		byID[r.Pack+"/"+r.ID] = r
	}
	appXid := map[string]bool{"13": true, "31": true, "43": true, "45": true}
	type tally struct{ n, hit int }
	perClass := map[string]*tally{}
	var pos, posHit, neg, negHit int
	for i, c := range loadCorpus(t) {
		ms := scanOne(t, e, c.RawLine)
		warnOrAbove := false
		for _, m := range ms {
			r := byID[m.Pack+"/"+m.Rule]
			if m.Severity != rules.SeverityInfo {
				warnOrAbove = true
			}
			taints := m.Action == rules.ActionTaint || r.Action == rules.ActionTaint
			if taints && c.Polarity == "negative" {
				t.Errorf("corpus line %d (negative %s): rule %s would taint: %s", i+1, c.Label, r, c.RawLine)
			}
			if taints && c.Label == "xid" && appXid[c.XidCode] {
				t.Errorf("corpus line %d (application Xid %s): rule %s would taint: %s", i+1, c.XidCode, r, c.RawLine)
			}
		}
		switch c.Polarity {
		case "positive":
			pos++
			tl := perClass[c.Label]
			if tl == nil {
				tl = &tally{}
				perClass[c.Label] = tl
			}
			tl.n++
			if len(ms) > 0 {
				posHit++
				tl.hit++
			} else {
				t.Logf("missed positive line %d (%s): %s", i+1, c.Label, c.RawLine)
			}
		case "negative":
			neg++
			if warnOrAbove {
				negHit++
				t.Logf("negative line %d (%s) matched at warning or above by %s/%s: %s", i+1, c.Label, ms[0].Pack, ms[0].Rule, c.RawLine)
			}
		}
		if c.Label == "xid" || c.Label == "sxid" {
			want, key := c.XidCode, "xid"
			if c.Label == "sxid" {
				want, key = strings.TrimPrefix(c.XidCode, "S"), "sxid"
			}
			found := false
			for _, m := range ms {
				if m.Captures[key] == want {
					found = true
				}
			}
			if !found {
				t.Errorf("corpus line %d: no match captures %s=%s: %s", i+1, key, want, c.RawLine)
			}
		}
	}
	classes := make([]string, 0, len(perClass))
	for k := range perClass {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	for _, k := range classes {
		tl := perClass[k]
		t.Logf("recall %-30s %3d/%-3d %.2f", k, tl.hit, tl.n, float64(tl.hit)/float64(tl.n))
	}
	recall := float64(posHit) / float64(pos)
	negRate := float64(negHit) / float64(neg)
	t.Logf("positive recall %.3f (%d/%d); negative lines matched at warning+ %.3f (%d/%d)", recall, posHit, pos, negRate, negHit, neg)
	if recall < 0.95 {
		t.Errorf("recall on positive lines %.3f < 0.95", recall)
	}
	if negRate > 0.01 {
		t.Errorf("negative lines matched at warning or above: %.3f > 0.01", negRate)
	}
}

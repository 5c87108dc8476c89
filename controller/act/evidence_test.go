package act

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/logstream"
)

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	for n := 4; n < 210; n++ {
		got := truncate(s, n)
		if len(got) > n && len(s) > n {
			t.Fatalf("truncate(%d) = %d bytes", n, len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("truncate(%d) is not valid UTF-8: %q", n, got)
		}
	}
	if got := truncate("short", 10); got != "short" {
		t.Fatalf("truncate changed a short string: %q", got)
	}
}

func TestParseTaint(t *testing.T) {
	for _, tc := range []struct {
		in, key, value, effect string
		ok                     bool
	}{
		{"faultline.io/faulty=xid-79:NoSchedule", "faultline.io/faulty", "xid-79", "NoSchedule", true},
		{"faultline.io/faulty=:NoExecute", "faultline.io/faulty", "", "NoExecute", true},
		{"nokey", "", "", "", false},
		{"=v:NoSchedule", "", "", "", false},
	} {
		got, ok := parseTaint(tc.in)
		if ok != tc.ok || (ok && (got.Key != tc.key || got.Value != tc.value || string(got.Effect) != tc.effect)) {
			t.Errorf("parseTaint(%q) = %+v, %v", tc.in, got, ok)
		}
		if ok && taintString(got) != tc.in {
			t.Errorf("taintString(parseTaint(%q)) = %q", tc.in, taintString(got))
		}
	}
}

func evidenceEntry(i, lines, lineLen int, placed bool) fault.Evidence {
	e := fault.Evidence{
		Rule: fmt.Sprintf("rule-%03d", i), Pack: "p", Severity: "critical", Action: "taint",
		Taint: fmt.Sprintf("faultline.io/r%d=v:NoSchedule", i), TaintPlaced: placed,
		Captures: map[string]string{"x": strings.Repeat("c", 300)},
		Count:    lines, Time: time.Unix(1700000000+int64(i), 0).UTC(), Recover: "manual",
	}
	for j := 0; j < lines; j++ {
		e.Lines = append(e.Lines, logstream.Line{Time: e.Time, Text: fmt.Sprintf("%d:%d <unknown> %s", i, j, strings.Repeat("x", lineLen))})
	}
	return e
}

func TestEncodeEvidenceLimits(t *testing.T) {
	l := limits{maxLines: 10, maxLineBytes: 1024, maxBytes: 64 << 10}

	// One entry: the newest 10 lines, each cut to 1 KiB, HTML characters unescaped.
	v, out := encodeEvidence([]fault.Evidence{evidenceEntry(1, 50, 5000, true)}, "p/rule-001", l)
	if len(out) != 1 || len(out[0].Lines) != 10 {
		t.Fatalf("got %d entries, %d lines", len(out), len(out[0].Lines))
	}
	if !strings.HasPrefix(out[0].Lines[0].Text, "1:40 ") || !strings.HasPrefix(out[0].Lines[9].Text, "1:49 ") {
		t.Fatalf("kept lines %q .. %q, want the newest", out[0].Lines[0].Text[:6], out[0].Lines[9].Text[:6])
	}
	for _, ln := range out[0].Lines {
		if len(ln.Text) > 1024 {
			t.Fatalf("line of %d bytes", len(ln.Text))
		}
	}
	if !strings.Contains(v, "<unknown>") {
		t.Fatalf("annotation escapes HTML characters")
	}
	parsed, err := fault.ParseEvidence(v)
	if err != nil || len(parsed) != 1 {
		t.Fatalf("annotation does not parse back: %v", err)
	}

	// 100 entries of 10 KiB lines each: lines and captures go, oldest first, the
	// firing entry keeps its lines, entries owning a taint all stay, and the
	// value is at most 64 KiB.
	var entries []fault.Evidence
	for i := 0; i < 100; i++ {
		entries = append(entries, evidenceEntry(i, 10, 1000, i%2 == 0))
	}
	keep := "p/rule-007"
	v, out = encodeEvidence(entries, keep, l)
	if len(v) > l.maxBytes {
		t.Fatalf("annotation is %d bytes, limit %d", len(v), l.maxBytes)
	}
	var decoded []fault.Evidence
	if err := json.Unmarshal([]byte(v), &decoded); err != nil || len(decoded) != len(out) {
		t.Fatalf("annotation does not decode to the returned entries: %v", err)
	}
	owners, keptFiring := 0, false
	for _, e := range out {
		if e.TaintPlaced {
			owners++
		}
		if e.ID() == keep {
			keptFiring = len(e.Lines) > 0
		}
	}
	if owners != 50 {
		t.Fatalf("%d entries owning a taint kept, want all 50", owners)
	}
	if !keptFiring {
		t.Fatalf("the firing entry lost its lines")
	}
	t.Logf("100 entries -> %d entries, %d bytes", len(out), len(v))
}

package act

import (
	"strings"
	"testing"
	"unicode/utf8"
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

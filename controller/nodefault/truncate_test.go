package nodefault

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	for n := 4; n < 210; n++ {
		got := Truncate(s, n)
		if len(got) > n && len(s) > n {
			t.Fatalf("Truncate(%d) = %d bytes", n, len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Truncate(%d) is not valid UTF-8: %q", n, got)
		}
	}
	if got := Truncate("short", 10); got != "short" {
		t.Fatalf("Truncate changed a short string: %q", got)
	}
}

package rules

import (
	"math/rand"
	"strings"
	"testing"
	"unsafe"
)

// TestGramFilterIsExact: the gram filter says a text holds a pattern exactly when
// the Aho-Corasick automaton finds one, on pattern-laden and random texts, in any
// case and at the text's edges.
func TestGramFilterIsExact(t *testing.T) {
	patterns := []string{"nvrm: xid (", "+0x", "link down", "sxid", "fallen off the bus", "é_x", "xid"}
	f := newGramFilter(patterns)
	b := newAC(patterns)
	r := rand.New(rand.NewSource(3))
	alphabet := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 :+().é_"
	found := 0
	for i := 0; i < 50000; i++ {
		var sb strings.Builder
		for n := r.Intn(40); n > 0; n-- {
			if r.Intn(8) == 0 {
				p := patterns[r.Intn(len(patterns))]
				if r.Intn(2) == 0 {
					p = strings.ToUpper(p)
				}
				cut := r.Intn(len(p) + 1)
				sb.WriteString(p[:cut])
				if r.Intn(2) == 0 {
					sb.WriteString(p[cut:])
				}
				continue
			}
			sb.WriteByte(alphabet[r.Intn(len(alphabet))])
		}
		s := sb.String()
		it := b.IterOverlappingByte(unsafe.Slice(unsafe.StringData(s), len(s)))
		want := len(s) >= minLiteralLen && it.Next() != nil
		if got := f.any(s); got != want {
			t.Fatalf("any(%q) = %v, automaton says %v", s, got, want)
		}
		if want {
			found++
		}
	}
	if found < 1000 {
		t.Fatalf("only %d texts held a pattern: the test does not exercise the filter", found)
	}
}

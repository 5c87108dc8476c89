package rules

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// TestFirstBytesHoldEveryMatchStart: wherever a regex matches a non-empty span, the
// span's first byte is among the regex's first bytes, and a regex that can match
// the empty string has none. Checked on random texts of the bytes the regexes name,
// case variants, multi-byte and invalid UTF-8 included.
func TestFirstBytesHoldEveryMatchStart(t *testing.T) {
	exprs := []string{
		`^\s*(?:Workqueue: (?P<w>\S+)|RSP: [0-9a-f]{4}|FS: +[0-9a-f]+|CR2: \d+|sp : x)`,
		`(?i)^kernel: k`, `(?i)ſs`, `^x?y*z+`, `^(?:a|b*)c`, `^(?:a|b*)`, `\bword`, `^$`, `^.`, `(?s)^.`,
		`^[^a-z]x`, `^[é-ü]`, `^\x{FFFD}`, `(?i)^[k-l]`, `^(?:ab){0,2}c`, `^(?:ab){2}c`, `\Ax|y`, `(?m)^a`,
		`^\pL`, `^[\d\s]+$`, `^[[:upper:]]`, `(?U)^a+?b`, `(?i)^ß`,
	}
	alphabet := []string{"a", "b", "c", "x", "y", "z", "k", "K", "\u212a", "s", "S", "ſ", "é", "ü", "ß", "ẞ", "\xff", "\x80",
		" ", "\t", "\n", ":", "0", "9", "W", "w", "R", "F", "C", "S", "P", "sp : x", "Workqueue: q", "RSP: 00ab", "FS:  0a",
		"CR2: 7", "kernel: k", "word", "ab", "\ufffd"}
	r := rand.New(rand.NewSource(1))
	for _, expr := range exprs {
		re := regexp.MustCompile(expr)
		set := firstBytes(expr)
		if re.MatchString("") && set != nil {
			t.Errorf("%s matches the empty text, yet has first bytes", expr)
		}
		if set == nil {
			continue
		}
		for n := 0; n < 3000; n++ {
			var b strings.Builder
			for k := r.Intn(6); k >= 0; k-- {
				b.WriteString(alphabet[r.Intn(len(alphabet))])
			}
			text := b.String()
			for start := 0; start < len(text); start++ {
				if m := re.FindStringIndex(text[start:]); m != nil && m[1] > m[0] && !set.has(text[start+m[0]]) {
					t.Fatalf("%s matches %q at %d, first byte %#x not in its set", expr, text[start:], m[0], text[start+m[0]])
				}
			}
		}
	}
}

// TestFirstBytesOfAnchoredRules: the engine rejects a line by its first byte only
// for rules whose primary regex is anchored at the text's start, and the default
// packs have such rules.
func TestFirstBytesOfAnchoredRules(t *testing.T) {
	set := defaultPacksSet(t)
	e := NewEngine(set)
	n := 0
	for i, r := range set.Rules {
		if e.first[i] != nil {
			n++
			if !r.regex.startAnchored {
				t.Errorf("%s: first bytes for a regex not anchored at the start", r)
			}
		}
	}
	if n == 0 {
		t.Fatal("no default rule has first bytes: the check shows nothing")
	}
}

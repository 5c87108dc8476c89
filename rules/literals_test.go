package rules

import (
	"math/rand"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestRequiredLiterals(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)`, []string{"NVRM: Xid ("}},
		{`(?:AER: Corrected|severity=Corrected)`, []string{"AER: Corrected", "severity=Corrected"}},
		{`SXid .*, (Fatal|Non-fatal)`, []string{", Fatal", ", Non-fatal"}}, // longer beats fewer
		{`[Xx]id (\d+)`, []string{"xid "}},
		{`(?i)link down`, []string{" down"}},        // k may fold to the Kelvin sign: split there
		{`(?i)GPU has fallen`, []string{" fallen"}}, // s splits too; the longest safe piece wins
		{`\d+ errors?`, []string{" error"}},
		{`a|bc`, nil}, // too short to filter on
		{`.*`, nil},   // nothing required
		{`(?:x)?abc`, []string{"abc"}},
		{`foo(bar|baz)qux`, []string{"foobarqux", "foobazqux"}},
		// A shared word before branches that start with their own words: the joined
		// literals, rarer than the word alone (syntax.Parse factors "NVRM: " out).
		{`NVRM: (?:GSP RPC timeout \d+|FATAL: Failed to re-allocate BAR1|BAR\d+ is \d+M)`,
			[]string{"NVRM: GSP RPC timeout ", "NVRM: FATAL: Failed to re-allocate BAR1", "NVRM: BAR"}},
		{`nvidia-modeset: (?:WARNING|ERROR): GPU:-?\d+: (?P<e>.+)`, []string{"nvidia-modeset: WARNING: GPU:", "nvidia-modeset: ERROR: GPU:"}},
		{`mlx5_core \S+: (?:cmd_work_handler|health_recover)\w*:\d+`, []string{": cmd_work_handler", ": health_recover"}},
		// An optional piece is "" or itself: the words around it still join.
		{`INFO: \S+ (?:self-detected|detected(?: expedited)?) stalls? on`,
			[]string{" self-detected stall on", " self-detected stalls on", " detected stall on", " detected stalls on", " detected expedited stall on", " detected expedited stalls on"}},
	}
	for _, c := range cases {
		if got := requiredLiterals(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.expr, got, c.want)
		}
	}
}

func TestRequiredLiteralSets(t *testing.T) {
	cases := []struct {
		expr string
		want [][]string
	}{
		// Every piece of a concatenation is required, each with its alternatives.
		// An alternation: each branch's best together, then each set a branch
		// requires joined with the other branches' best.
		{`NVRM:\s+(?:Reported by libos|Xid \d+ occurred at)`, [][]string{{" occurred at", "reported by libos"}, {"nvrm:"}, {"reported by libos", "xid "}}},
		// A branch whose best literal is common ("detected ") and whose other words
		// are rare: a line with "detected" alone holds no member of the joined set.
		{`Detected \d+ (?P<f>.+?) for GPU \d+|(?P<f>.+?) met or exceeded the threshold`,
			[][]string{{" met or exceeded the threshold", "detected "}, {" for gpu ", " met or exceeded the threshold"}}},
		{`nvidia-nvswitch(?P<switch>\d+): SXid \(PCI:`, [][]string{{"nvidia-nvswitch"}, {": sxid (pci:"}}},
		{`(?:abc|de)x`, [][]string{{"abcx", "dex"}}}, // "de" alone is too short, joined it is not
		{`(?:foo)?bar\d+`, [][]string{{"bar"}}},      // optional pieces require nothing
	}
	for _, c := range cases {
		if got := requiredLiteralSets(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.expr, got, c.want)
		}
	}
	if !holdsAll(requiredLiteralSets(`NVRM:\s+(?:Reported by libos|Xid \d+ occurred at)`), "x NVRM: ... Xid 5 OCCURRED AT y") {
		t.Error("holds: the sets are in the line, folded")
	}
	if holdsAll(requiredLiteralSets(`NVRM:\s+(?:Reported by libos|Xid \d+ occurred at)`), "NVRM: GPU at PCI:0000:3b:00") {
		t.Error("holds: the second set is not in the line")
	}
	dcgm := requiredLiteralSets(`Detected \d+ (?P<f>.+?) for GPU \d+|(?P<f>.+?) met or exceeded the threshold`)
	if holdsAll(dcgm, "loop0: detected capacity change from 0 to 2048") {
		t.Error("holds: a benign line with the common word alone passes")
	}
	if !holdsAll(dcgm, "Detected 12 XID errors for GPU 3") {
		t.Error("holds: a matching line is refused")
	}
}

// TestMatchesNearIsMatchString: searching from just before the first literal answers
// as a search of the whole line does, for the regexes it is used on (no named
// groups, no start anchors) and at word edges, where \b must read the same.
func TestMatchesNearIsMatchString(t *testing.T) {
	exprs := []string{
		`(?:[\w.@-]+(?:: (?:NIC )?| NIC )(?:[Ll]ink [Uu]p|[Ll]ink is [Uu]p)\b|Port: ?\d+ Link ACTIVE)`,
		`\blink\b`,          // \b at the search's start
		`\Bink up`,          // \B there
		`[a-z]+\d* link up`, // a match that starts far before its literal
		`x{20,}link up`,
		`(?i)link up$`,
	}
	r := rand.New(rand.NewSource(5))
	pieces := []string{"Link up", "link UP", "LINK IS UP", " ", ": ", "NIC ", "eno1", "Port: 3 Link ACTIVE",
		"xxxxxxxxxxxxxxxxxxxxxxxx", "é", ".", "_", "-", "0000:3b:00.0", "igb", "\t", "up"}
	matched := 0
	for _, expr := range exprs {
		re := regexp.MustCompile(expr)
		if anchoredAtStart(expr) {
			t.Fatalf("%s: no start anchor", expr)
		}
		lits := requiredLiterals(expr)
		if lits == nil {
			t.Fatalf("%s: no literals", expr)
		}
		for i := range lits {
			lits[i] = lower(lits[i])
		}
		for n := 0; n < 20000; n++ {
			var sb strings.Builder
			for k := r.Intn(12); k > 0; k-- {
				sb.WriteString(pieces[r.Intn(len(pieces))])
			}
			s := sb.String()
			want := re.MatchString(s)
			if got := matchesNear(re, s, firstIndexFold(s, lits)); got != want {
				t.Fatalf("matchesNear(%s, %q) = %v, MatchString says %v", expr, s, got, want)
			}
			if want {
				matched++
			}
		}
	}
	if matched < 1000 {
		t.Fatalf("only %d texts matched: the test does not exercise the search", matched)
	}
	for expr, want := range map[string]bool{`^link up`: true, `(?m)^up`: true, `\Alink`: true, `a\b^?link`: true, `link up\b`: false} {
		if got := anchoredAtStart(expr); got != want {
			t.Errorf("anchoredAtStart(%s) = %v, want %v", expr, got, want)
		}
	}
}

// TestIndexFold: the first place of a lower-case literal in a text, ASCII letters
// folded, for literals with and without a byte that is no letter, and whose rarest
// byte is a letter, met in either case, at either end or repeated.
func TestIndexFold(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	alphabet := "abkKLlinUPup :.é_"
	for _, lit := range []string{"link is up", "link", "k:", ": l", "ééa", "kk", "upk", "k", "a", "klk"} {
		for n := 0; n < 20000; n++ {
			b := make([]byte, r.Intn(30))
			for i := range b {
				b[i] = alphabet[r.Intn(len(alphabet))]
			}
			s := string(b)
			if r.Intn(3) == 0 {
				s += strings.ToUpper(lit)
			}
			if got, want := indexFold(s, lit), strings.Index(lower(s), lit); got != want {
				t.Fatalf("indexFold(%q, %q) = %d, want %d", s, lit, got, want)
			}
		}
	}
}

// A set searched in one pass answers as searching each literal does, on random
// lines made of the literals' pieces, in either case.
func TestLiteralSetOnePass(t *testing.T) {
	long := []string{"fail", "error", "err(", "timed out", "timeout", "not re", "nown", "can't", "abort"}
	// with a one-byte literal too (its byte alone is a match)
	for _, set := range [][]string{long, append(long, "a")} {
		r := rand.New(rand.NewSource(3))
		pieces := []string{"fai", "l", "ERR", "or", "(", "time", "d out", "out", "not ", "re", "kno", "wn", "can'", "t", " ", "x", "A", "b"}
		onePass, each := compileSet(set), litSet{lits: set}
		if onePass.byFirst == nil {
			t.Fatal("a set this large is searched literal by literal")
		}
		found := 0
		for i := 0; i < 20000; i++ {
			var b strings.Builder
			for n := r.Intn(8); n >= 0; n-- {
				b.WriteString(pieces[r.Intn(len(pieces))])
			}
			line := b.String()
			got, want := onePass.in(line), each.in(line)
			if got != want {
				t.Fatalf("%q: one pass %v, each literal %v", line, got, want)
			}
			if got {
				found++
			}
		}
		if found == 0 || found == 20000 {
			t.Errorf("%d sets: %d of 20000 lines hold a literal: the lines test nothing", len(set), found)
		}
	}
}

func TestFiniteStrings(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`link status (?:definitely up|up again after|up, enabling it)`,
			[]string{"link status definitely up", "link status up again after", "link status up, enabling it"}},
		{`[Ll]ink (up|UP)`, []string{"Link up", "Link UP", "link up", "link UP"}},
		{`a(?:)b`, []string{"ab"}},
		{`(?i)link up`, nil},               // case folding
		{`links? up`, nil},                 // repetition
		{`\blink up`, nil},                 // assertion
		{`link [a-z]p`, nil},               // a class of many bytes
		{`café`, nil},                      // not ASCII
		{`^link up`, nil},                  // anchor
		{`(a|b)(c|d)(e|f)(g|h)(i|j)`, nil}, // too many
		{`(`, nil},
	}
	for _, c := range cases {
		if got := finiteStrings(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("finiteStrings(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// holdsAll reports whether text holds a literal of every set, as the engine checks
// a regex's sets.
func holdsAll(sets [][]string, text string) bool {
	for _, set := range sets {
		if ls := compileSet(set); !ls.in(text) {
			return false
		}
	}
	return true
}

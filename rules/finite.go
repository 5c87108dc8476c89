package rules

import (
	"regexp/syntax"
	"strings"
	"unicode"
)

// maxFinite bounds the strings finiteStrings expands a regex into.
const maxFinite = 16

// finiteStrings returns the strings a regex matches, when they are a few ASCII
// literals ("link status (?:definitely up|up again after)", "[Ll]ink up"), else nil:
// such a regex matches a text exactly when the text holds one of them, which
// strings.Contains finds at a fraction of what a run of the regex costs. Classes of
// more than a few bytes, repetitions and assertions are not expanded, nor letters
// folded to a rune beyond ASCII (k and s).
func finiteStrings(expr string) []string {
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	return expand(tree.Simplify())
}

func expand(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}
	case syntax.OpLiteral:
		out := []string{""}
		for _, r := range re.Rune {
			if r >= 0x80 { // text that is no valid UTF-8 matches U+FFFD of a regex
				return nil
			}
			cases := []string{string(r)}
			if re.Flags&syntax.FoldCase != 0 && unicode.IsLetter(r) {
				if l := unicode.ToLower(r); l == 'k' || l == 's' {
					return nil // they fold to the Kelvin sign and the long s too
				}
				cases = []string{string(unicode.ToUpper(r)), string(unicode.ToLower(r))}
			}
			if out = cross(out, cases); out == nil {
				return nil
			}
		}
		return out
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= 0x80 || int(hi-lo)+1+len(out) > maxFinite {
				return nil
			}
			for r := lo; r <= hi; r++ {
				out = append(out, string(r))
			}
		}
		return out
	case syntax.OpCapture:
		return expand(re.Sub[0])
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			s := expand(sub)
			if s == nil || len(out)+len(s) > maxFinite {
				return nil
			}
			out = append(out, s...)
		}
		return out
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			if out = cross(out, expand(sub)); out == nil {
				return nil
			}
		}
		return out
	}
	return nil
}

// cross returns every string of a followed by one of b; nil when b is nil or they
// are more than maxFinite.
func cross(a, b []string) []string {
	if b == nil || len(a)*len(b) > maxFinite {
		return nil
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out
}

// containsAny reports whether s holds one of subs.
func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

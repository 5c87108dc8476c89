package rules

import (
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// byteSet is a set of bytes, one bit each.
type byteSet [4]uint64

func (b *byteSet) add(c byte)      { b[c/64] |= 1 << (c % 64) }
func (b *byteSet) has(c byte) bool { return b[c/64]&(1<<(c%64)) != 0 }
func (b *byteSet) addRange(lo, hi int) {
	for c := lo; c <= hi; c++ {
		b.add(byte(c))
	}
}

// firstBytes returns the bytes a match of expr can start with, or nil when a match
// may be empty or its start is not known. For a regex anchored at the text's start,
// a line whose first byte is not among them cannot match: the regex does not need to
// run (a failing run of the backtracker still clears state the size of the program
// times the line).
func firstBytes(expr string) *byteSet {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	var set byteSet
	if nullable := firstOf(re.Simplify(), &set); nullable {
		return nil
	}
	return &set
}

// firstOf adds to set the bytes a match of re can start with and reports whether a
// match can be empty (then what follows re can start the match too).
func firstOf(re *syntax.Regexp, set *byteSet) (nullable bool) {
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return true
		}
		addRune(set, re.Rune[0], re.Flags&syntax.FoldCase != 0)
		return false
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo < utf8.RuneSelf {
				set.addRange(int(lo), int(min(hi, utf8.RuneSelf-1)))
			}
			if hi >= utf8.RuneSelf {
				// Any lead byte; an invalid byte reads as U+FFFD, which may be in the class.
				set.addRange(utf8.RuneSelf, 0xFF)
			}
		}
		return false
	case syntax.OpAnyCharNotNL:
		set.addRange(0, '\n'-1)
		set.addRange('\n'+1, 0xFF)
		return false
	case syntax.OpAnyChar:
		set.addRange(0, 0xFF)
		return false
	case syntax.OpCapture:
		return firstOf(re.Sub[0], set)
	case syntax.OpStar, syntax.OpQuest:
		firstOf(re.Sub[0], set)
		return true
	case syntax.OpPlus:
		return firstOf(re.Sub[0], set)
	case syntax.OpRepeat:
		return firstOf(re.Sub[0], set) || re.Min == 0
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !firstOf(sub, set) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		nullable = false
		for _, sub := range re.Sub {
			if firstOf(sub, set) {
				nullable = true
			}
		}
		return nullable
	}
	return true // unknown: as if a match could start anywhere
}

// addRune adds the first byte of r's encoding, and of the runes it folds to.
func addRune(set *byteSet, r rune, foldCase bool) {
	var buf [utf8.UTFMax]byte
	add := func(r rune) {
		if r < utf8.RuneSelf {
			set.add(byte(r))
			return
		}
		if r == utf8.RuneError || !utf8.ValidRune(r) {
			// An invalid byte reads as U+FFFD.
			set.addRange(utf8.RuneSelf, 0xFF)
			return
		}
		utf8.EncodeRune(buf[:], r)
		set.add(buf[0])
	}
	add(r)
	if foldCase {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			add(f)
		}
	}
}

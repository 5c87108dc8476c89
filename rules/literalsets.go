package rules

// litSet is one literal set a regex needs (the line holds one of its literals),
// compiled for the engine's check before the regex runs. A set of a few literals is
// searched literal by literal (IndexByte finds each first byte fast); a larger one
// in one pass over the line, looking up each byte among the set's first bytes, so
// its cost follows the line's length, not the number of literals.
type litSet struct {
	lits []string // lower-case
	// byFirst[c] lists the literals that start with byte c (lower-case); nil for a
	// set searched literal by literal.
	byFirst *[256][]string
	// pairs has the bit of each literal's first two bytes (lower-case, six low bits
	// of each: 512 bytes a set, for the engine's couple of hundred sets) and one1 the
	// first byte of each one-byte literal (nil: none): most bytes of a line start no
	// literal's pair, so the literals behind a first byte are compared only where one
	// may start.
	pairs *[1 << 12 / 64]uint64
	one1  *[256 / 64]uint64
}

// pairBit is the bit of pairs for the lower-case bytes a and b.
func pairBit(a, b byte) uint16 { return uint16(a&63)<<6 | uint16(b&63) }

// onePassMin is the size from which a set is searched in one pass.
const onePassMin = 5

func compileSet(set []string) litSet {
	ls := litSet{lits: set}
	if len(set) >= onePassMin {
		ls.byFirst = new([256][]string)
		ls.pairs = new([1 << 12 / 64]uint64)
		for _, l := range set {
			ls.byFirst[l[0]] = append(ls.byFirst[l[0]], l)
			if len(l) == 1 {
				if ls.one1 == nil {
					ls.one1 = new([256 / 64]uint64)
				}
				ls.one1[l[0]>>6] |= 1 << (l[0] & 63)
				continue
			}
			p := pairBit(l[0], l[1])
			ls.pairs[p>>6] |= 1 << (p & 63)
		}
	}
	return ls
}

// setRefs are literal sets a regex needs, by index in Engine.sets.
type setRefs []int32

// holds reports whether text holds a literal of every set of refs, ASCII
// case-insensitively, checking each set at most once per line (s keeps the answers).
func (e *Engine) holds(refs setRefs, text string, s *scratch) bool {
	for _, id := range refs {
		switch s.setDone[id] {
		case nearYes:
			continue
		case nearNo:
			return false
		}
		s.setSeen = append(s.setSeen, id)
		if !e.sets[id].in(text) {
			s.setDone[id] = nearNo
			return false
		}
		s.setDone[id] = nearYes
	}
	return true
}

func (s *litSet) in(text string) bool {
	if s.byFirst == nil {
		for _, l := range s.lits {
			if containsFold(text, l) {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(text); i++ {
		c := fold[text[i]]
		if i+1 < len(text) && (s.one1 == nil || s.one1[c>>6]&(1<<(c&63)) == 0) {
			if p := pairBit(c, fold[text[i+1]]); s.pairs[p>>6]&(1<<(p&63)) == 0 {
				continue
			}
		}
		for _, l := range s.byFirst[c] {
			if len(text)-i >= len(l) && equalFold(text[i:i+len(l)], l) {
				return true
			}
		}
	}
	return false
}

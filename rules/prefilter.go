package rules

import (
	"math"
	"sort"
)

// gramFilter finds which of a set of patterns a text contains (ASCII
// case-insensitively), overlapping ones included; on the benign majority of lines,
// which hold none, at a fraction of the cost of an Aho-Corasick automaton, whose
// tables do not fit the CPU's first-level cache: each pattern is represented by its
// rarest 4-byte window, the windows are hashed into a bitmap that does fit, and a
// set bit is confirmed by comparing the patterns behind that window. Every
// occurrence of a pattern holds its window, so no occurrence is missed. A 3-byte
// pattern stands for the 256 windows it ends.
type gramFilter struct {
	bitmap *[1 << gramBits / 64]uint64
	// heads[h] is 1 + the index in entries of the first window hashing to h (0: none);
	// entries are grouped by hash. A direct table: confirming is on the hot path for
	// windows that common words share.
	heads   *[1 << gramBits]uint32
	entries []gramEntry
}

// gramEntry is one pattern behind a window: the window's bytes, and where the
// window starts in the pattern (-1: the byte before a 3-byte pattern, any byte).
type gramEntry struct {
	hash    uint32
	g       uint32
	off     int
	lit     string // lower-case
	pattern int32  // index in the filter's patterns
}

// wordPenalty is added to the score of a window of four letters, edgeSpacePenalty
// for a space at either end and spacePenalty for one inside: four letters are most
// often the inside of a common word ("kern", "stat"), a space at the end its edge
// ("ing ", " mod"), while a space inside joins two particular words ("g er").
const (
	wordPenalty      = 6
	edgeSpacePenalty = 4
	spacePenalty     = 1
)

// gramBits is log2 of the bitmap size: 2^18 bits are 32 KiB.
const gramBits = 18

// fold lower-cases ASCII letters, as the automaton's ASCII case-insensitivity does.
var fold = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

func gramHash(g uint32) uint32 { return (g * 0x9E3779B1) >> (32 - gramBits) }

// newGramFilter builds the filter for lower-case patterns of at least 3 bytes.
func newGramFilter(patterns []string) *gramFilter {
	f := &gramFilter{bitmap: new([1 << gramBits / 64]uint64), heads: new([1 << gramBits]uint32)}
	for i, p := range patterns {
		if len(p) == 3 {
			g := uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2])
			for b := uint32(0); b < 256; b++ {
				f.entries = append(f.entries, gramEntry{g: b<<24 | g, off: -1, lit: p, pattern: int32(i)})
			}
			continue
		}
		off := rarestWindow(p)
		g := uint32(p[off])<<24 | uint32(p[off+1])<<16 | uint32(p[off+2])<<8 | uint32(p[off+3])
		f.entries = append(f.entries, gramEntry{g: g, off: off, lit: p, pattern: int32(i)})
	}
	for i := range f.entries {
		f.entries[i].hash = gramHash(f.entries[i].g)
	}
	sort.SliceStable(f.entries, func(i, j int) bool { return f.entries[i].hash < f.entries[j].hash })
	for i := len(f.entries) - 1; i >= 0; i-- {
		h := f.entries[i].hash
		f.bitmap[h/64] |= 1 << (h % 64)
		f.heads[h] = uint32(i + 1)
	}
	return f
}

// rarestWindow returns the offset of the 4-byte window of p least likely to occur in
// log text, by the frequencies of its bytes. Four letters in a row are most often
// the inside of a common word ("kern", "mode", "stat"), so windows that hold a
// word's edge are preferred.
func rarestWindow(p string) int {
	best, bestScore := 0, math.Inf(1)
	for i := 0; i+4 <= len(p); i++ {
		s, letters := 0.0, 0
		for j, c := range []byte(p[i : i+4]) {
			s += math.Log(float64(byteFreq[c]) + 1)
			switch {
			case 'a' <= c && c <= 'z':
				letters++
			case c == ' ' && (j == 0 || j == 3):
				s += edgeSpacePenalty
			case c == ' ':
				s += spacePenalty
			}
		}
		if letters == 4 {
			s += wordPenalty
		}
		if s < bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// find calls found for every pattern s contains (once or more for each) and
// reports whether there was any.
func (f *gramFilter) find(s string, found func(pattern int32)) bool {
	bm := f.bitmap
	var g uint32
	any := false
	for i := 0; i < len(s); i++ {
		g = g<<8 | uint32(fold[s[i]])
		h := gramHash(g) & (1<<gramBits - 1)
		if bm[h/64]&(1<<(h%64)) != 0 && f.confirm(s, i-3, g, h, found) {
			any = true
		}
	}
	return any
}

// confirm checks the patterns whose window g (hashing to h) starts at s[at]; at is
// negative near the start of the text. It calls found for each pattern present.
func (f *gramFilter) confirm(s string, at int, g, h uint32, found func(int32)) bool {
	k := int(f.heads[h]) - 1
	if k < 0 {
		return false
	}
	ok := false
	for ; k < len(f.entries) && f.entries[k].hash == h; k++ {
		e := &f.entries[k]
		if e.g != g {
			continue
		}
		start := at - e.off
		if start >= 0 && start+len(e.lit) <= len(s) && equalFold(s[start:start+len(e.lit)], e.lit) {
			found(e.pattern)
			ok = true
		}
	}
	return ok
}

// equalFold compares s with a lower-case pattern, folding ASCII letters of s only.
func equalFold(s, lower string) bool {
	for i := 0; i < len(lower); i++ {
		if fold[s[i]] != lower[i] {
			return false
		}
	}
	return true
}

// byteFreq counts each byte in the lines of the development corpus
// (testdata/corpus), lower-cased: kernel and pod log text as it comes.
var byteFreq = [256]uint16{
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	6224, 23, 10, 14, 0, 0, 0, 42, 255, 254, 84, 16, 375, 310, 615, 191,
	3492, 1301, 1001, 636, 701, 617, 632, 456, 540, 521, 1723, 9, 64, 193, 87, 2,
	12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 398, 0, 399, 0, 359,
	10, 1505, 458, 1456, 1194, 2720, 634, 509, 364, 1695, 56, 431, 1084, 872, 1834, 1630,
	996, 43, 2064, 1197, 1512, 790, 523, 239, 417, 215, 29, 6, 7, 6, 0, 0,
	2, 0, 1, 0, 0, 0, 0, 2, 3, 0, 0, 0, 1, 0, 1, 0,
	0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 3, 0, 0, 1,
	0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 3, 0, 2, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 2, 0, 1, 1, 5, 3, 1, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
}

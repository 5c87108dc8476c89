package rules

import "math"

// gramFilter answers "does the text contain any of the patterns?" (ASCII
// case-insensitively) for the benign majority of lines at a fraction of the cost
// of the Aho-Corasick automaton, whose tables do not fit the CPU's first-level
// cache: each pattern is represented by its rarest 4-byte window, the windows are
// hashed into a bitmap that does fit, and a set bit is confirmed by comparing the
// patterns behind that window. A 3-byte pattern stands for the 256 windows it ends.
type gramFilter struct {
	bitmap *[1 << gramBits / 64]uint64
	// byGram lists, for each chosen 4-byte window, the patterns holding it and where;
	// short lists the 3-byte patterns by their bytes.
	byGram map[uint32][]gramPattern
	short  map[uint32]string
}

type gramPattern struct {
	lit string // lower-case
	off int    // offset of the window in lit
}

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

func (f *gramFilter) set(g uint32) {
	h := gramHash(g)
	f.bitmap[h/64] |= 1 << (h % 64)
}

// newGramFilter builds the filter for lower-case patterns of at least 3 bytes.
func newGramFilter(patterns []string) *gramFilter {
	f := &gramFilter{bitmap: new([1 << gramBits / 64]uint64), byGram: map[uint32][]gramPattern{}, short: map[uint32]string{}}
	for _, p := range patterns {
		if len(p) == 3 {
			g := uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2])
			for b := uint32(0); b < 256; b++ {
				f.set(b<<24 | g)
			}
			f.short[g] = p
			continue
		}
		off := rarestWindow(p)
		g := uint32(p[off])<<24 | uint32(p[off+1])<<16 | uint32(p[off+2])<<8 | uint32(p[off+3])
		f.set(g)
		f.byGram[g] = append(f.byGram[g], gramPattern{lit: p, off: off})
	}
	return f
}

// rarestWindow returns the offset of the 4-byte window of p least likely to occur in
// log text, by the frequencies of its bytes.
func rarestWindow(p string) int {
	best, bestScore := 0, math.Inf(1)
	for i := 0; i+4 <= len(p); i++ {
		s := 0.0
		for _, c := range []byte(p[i : i+4]) {
			s += math.Log(float64(byteFreq[c]) + 1)
		}
		if s < bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// any reports whether s contains one of the patterns, ASCII case-insensitively.
func (f *gramFilter) any(s string) bool {
	bm := f.bitmap
	var g uint32 // the window before the text holds zero bytes
	for i := 0; i < len(s); i++ {
		g = g<<8 | uint32(fold[s[i]])
		h := gramHash(g)
		if bm[(h/64)&(1<<gramBits/64-1)]&(1<<(h%64)) != 0 && f.confirm(s, i-3, g) {
			return true
		}
	}
	return false
}

// confirm checks the patterns whose window g starts at s[at] (at may be negative
// at the start of the text).
func (f *gramFilter) confirm(s string, at int, g uint32) bool {
	if len(f.short) > 0 {
		if p, ok := f.short[g&0xffffff]; ok && at+1 >= 0 && equalFold(s[at+1:at+4], p) {
			return true
		}
	}
	for _, p := range f.byGram[g] {
		start := at - p.off
		if start < 0 || start+len(p.lit) > len(s) {
			continue
		}
		if equalFold(s[start:start+len(p.lit)], p.lit) {
			return true
		}
	}
	return false
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

package rules

import (
	"math"
	"strings"
)

// gramFilter finds which of a set of patterns a text contains (ASCII
// case-insensitively), overlapping ones included; on the benign majority of lines,
// which hold none, at a fraction of the cost of an Aho-Corasick automaton, whose
// tables do not fit the CPU's first-level cache: each pattern is represented by a
// pair of adjacent 4-byte windows (its rarest), the windows are hashed into a bitmap
// that does fit, and a set bit is confirmed by comparing the patterns behind that
// window. The text is probed at every other byte only: of two adjacent windows of an
// occurrence one ends at a probed byte, so no occurrence is missed. Patterns of 3
// and 4 bytes have fewer windows of their own: a window that reaches one byte past
// them stands for the 256 windows it can be (the text's edges read as zero bytes).
//
// A 4-byte window is common text far more often than the pattern behind it ("k is"
// of "link is down" in every "NIC Link is Up"), and comparing the patterns behind
// it cost as much as the probing. So a pattern of 9 bytes or more is also
// represented by the 8-byte windows that end where its 4-byte ones do: a set bit of
// the first bitmap is compared only when the 8 bytes ending there are in a second
// bitmap (or the 4-byte window is a shorter pattern's, marked in a third).
type gramFilter struct {
	bitmap *[1 << gramBits / 64]uint64
	// long: the 8-byte windows of the patterns that have them, by long8Hash.
	long *[1 << longBits / 64]uint64
	// short: the 4-byte windows of the patterns without 8-byte ones, by shortHash:
	// a hash independent of gramHash, so that a window whose gramHash is a short
	// pattern's by chance is rejected here, not compared.
	short *[1 << shortBits / 64]uint64
	// The entries of bucket b (the top bucketBits of their window's hash) are
	// entries[buckets[b]:buckets[b+1]]. Confirming is on the hot path for windows
	// that common words share; a table this small stays in the CPU's cache, where
	// one indexed by the whole hash (a MiB) did not.
	buckets *[1<<bucketBits + 1]uint32
	// grams[k] is entries[k].g: a bucket's windows are compared in a few cache
	// lines, the entries behind them read only on a match.
	grams   []uint32
	entries []gramEntry
}

// gramEntry is one pattern behind a window: the window's bytes, and where the
// window starts in the pattern (-1: one byte before it).
type gramEntry struct {
	g   uint32
	off int
	// g8: the 8 bytes of the pattern that end where the window does, when long.
	g8      uint64
	long    bool
	lit     string // lower-case
	pattern int32  // index in the filter's patterns
}

// bucketBits is log2 of the number of buckets the entries are grouped in.
const bucketBits = 12

// wordPenalty is added to the score of a window of four letters, edgeSpacePenalty
// for a space at either end and spacePenalty for one inside: four letters are most
// often the inside of a common word ("kern", "stat"), a space at the end its edge
// ("ing ", " mod"), while a space inside joins two particular words ("g er").
const (
	wordPenalty      = 6
	edgeSpacePenalty = 4
	spacePenalty     = 1
	// sharedPenalty weighs the log of the number of patterns that hold a window.
	sharedPenalty = 6
)

// gramBits is log2 of the bitmap size: 2^18 bits are 32 KiB. longBits and
// shortBits size the second-level bitmaps, read only where the first has a bit set.
const (
	gramBits  = 18
	longBits  = 17
	shortBits = 16
)

// longMin is the shortest pattern given 8-byte windows: its 4-byte pair must
// start 4 bytes or more into it.
const longMin = 9

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

func long8Hash(g uint64) uint64 { return (g * 0x9E3779B97F4A7C15) >> (64 - longBits) }

// shortHash hashes the last three bytes of a short pattern's window, independently
// of gramHash. Three, not four: a pattern of 3 or 4 bytes is also represented by the
// 256 windows that a byte before it can make, which share their last three bytes and
// so set one bit (keyed by all four they would set 256, which common text would hit);
// only a 3-byte pattern's windows of a byte after it set 256.
func shortHash(g uint64) uint32 { return (uint32(g<<8) * 0x85EBCA6B) >> (32 - shortBits) }

// newGramFilter builds the filter for lower-case patterns of at least 3 bytes.
func newGramFilter(patterns []string) *gramFilter {
	f := &gramFilter{bitmap: new([1 << gramBits / 64]uint64), long: new([1 << longBits / 64]uint64),
		short: new([1 << shortBits / 64]uint64), buckets: new([1<<bucketBits + 1]uint32)}
	add := func(g uint32, off, i int) {
		f.entries = append(f.entries, gramEntry{g: g, off: off, lit: patterns[i], pattern: int32(i)})
	}
	window := window4
	// addLong adds the 4-byte window at off and the 8-byte one that ends with it.
	addLong := func(p string, off, i int) {
		var g8 uint64
		for _, c := range []byte(p[off-4 : off+4]) {
			g8 = g8<<8 | uint64(c)
		}
		f.entries = append(f.entries, gramEntry{g: window(p, off), off: off, g8: g8, long: true, lit: p, pattern: int32(i)})
	}
	shared := sharedWindows(patterns)
	for i, p := range patterns {
		head := uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2])
		switch len(p) {
		case 3: // the byte before it and the byte after it, any
			for b := uint32(0); b < 256; b++ {
				add(b<<24|head, -1, i)
				add(head<<8|b, 0, i)
			}
		case 4: // itself, and the byte before its first three, any
			add(window(p, 0), 0, i)
			for b := uint32(0); b < 256; b++ {
				add(b<<24|head, -1, i)
			}
		default:
			if len(p) >= longMin && !strings.ContainsRune(p, 0) {
				// A zero byte is what the probe reads before the text's start.
				off := 4 + rarestWindowPair(p[4:], shared)
				addLong(p, off, i)
				addLong(p, off+1, i)
				break
			}
			off := rarestWindowPair(p, shared)
			add(window(p, off), off, i)
			add(window(p, off+1), off+1, i)
		}
	}
	// Group the entries by bucket, in the order they were added (a counting sort).
	bucket := func(e *gramEntry) uint32 { return gramHash(e.g) >> (gramBits - bucketBits) }
	for i := range f.entries {
		e := &f.entries[i]
		h := gramHash(e.g)
		f.bitmap[h/64] |= 1 << (h % 64)
		if e.long {
			h8 := long8Hash(e.g8)
			f.long[h8/64] |= 1 << (h8 % 64)
		} else {
			hs := shortHash(uint64(e.g))
			f.short[hs/64] |= 1 << (hs % 64)
		}
		f.buckets[bucket(e)+1]++
	}
	for b := 1; b < len(f.buckets); b++ {
		f.buckets[b] += f.buckets[b-1]
	}
	next := *f.buckets
	grouped := make([]gramEntry, len(f.entries))
	for i := range f.entries {
		b := bucket(&f.entries[i])
		grouped[next[b]] = f.entries[i]
		next[b]++
	}
	f.entries = grouped
	f.grams = make([]uint32, len(grouped))
	for k := range grouped {
		f.grams[k] = grouped[k].g
	}
	return f
}

// rarestWindowPair returns the offset of the two adjacent 4-byte windows of p (at
// least 5 bytes) least likely to occur in log text, by the frequencies of their
// bytes and by how many other patterns hold them (shared).
func rarestWindowPair(p string, shared *windowCounts) int {
	score := func(w string) float64 {
		return windowScore(w) + sharedPenalty*shared.log(window4(w, 0))
	}
	best, bestScore := 0, math.Inf(1)
	prev := score(p[0:4])
	for i := 1; i+4 <= len(p); i++ {
		cur := score(p[i : i+4])
		if s := prev + cur; s < bestScore {
			best, bestScore = i-1, s
		}
		prev = cur
	}
	return best
}

// windowCounts counts, for each 4-byte window, the patterns that hold it. A
// window many patterns hold is a common piece of log text ("ed f" of "failed",
// "mlx5" of a driver's prefix): it is seen on many lines, and each time every
// pattern represented by it is compared. An open-addressing table of its own: every
// engine builds one (each scan, each reload), over tens of thousands of windows,
// where a map and a per-pattern list of the windows seen cost most of building the
// prefilter.
type windowCounts struct {
	shift, mask uint32
	slots       []windowSlot
}

// windowSlot is one window's count. last is the pattern that counted it last, plus
// one (0: an empty slot): a window a pattern holds twice counts once. One slot's
// fields share a cache line: the table is larger than the CPU's caches.
type windowSlot struct {
	key         uint32
	count, last int32
}

func sharedWindows(patterns []string) *windowCounts {
	n := 0
	for _, p := range patterns {
		n += max(len(p)-3, 0)
	}
	bits := uint32(10)
	for 1<<bits < 2*n {
		bits++
	}
	wc := &windowCounts{shift: 32 - bits, mask: 1<<bits - 1, slots: make([]windowSlot, 1<<bits)}
	for i, p := range patterns {
		for j := 0; j+4 <= len(p); j++ {
			w := window4(p, j)
			sl := &wc.slots[wc.slot(w)]
			if sl.last == int32(i)+1 {
				continue
			}
			sl.key, sl.last = w, int32(i)+1
			sl.count++
		}
	}
	return wc
}

// slot returns the slot of window w: its own, or the empty one where it would go.
// The hash's top bits: its low ones depend on the window's last bytes alone.
func (wc *windowCounts) slot(w uint32) uint32 {
	k := (w * 0x9E3779B1) >> wc.shift
	for wc.slots[k].last != 0 && wc.slots[k].key != w {
		k = (k + 1) & wc.mask
	}
	return k
}

// log returns the log of the number of patterns that hold w (-Inf for none, as
// math.Log(0)).
func (wc *windowCounts) log(w uint32) float64 {
	n := int(wc.slots[wc.slot(w)].count)
	if n < len(smallLogs) {
		return smallLogs[n]
	}
	return math.Log(float64(n))
}

// smallLogs are the logs of the counts most windows have.
var smallLogs = func() (t [64]float64) {
	for i := range t {
		t[i] = math.Log(float64(i))
	}
	return t
}()

// window4 is the 4-byte window of p at off, as the filter's probe reads it.
func window4(p string, off int) uint32 {
	return uint32(p[off])<<24 | uint32(p[off+1])<<16 | uint32(p[off+2])<<8 | uint32(p[off+3])
}

// windowScore rates how likely a 4-byte window is to occur in log text (lower is
// rarer). Four letters in a row are most often the inside of a common word ("kern",
// "mode", "stat"), so windows that hold a word's edge are preferred.
func windowScore(w string) float64 {
	s, letters := 0.0, 0
	for j := 0; j < 4; j++ {
		c := w[j]
		s += byteLogFreq[c]
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
	return s
}

// byteLogFreq is log(byteFreq+1), for windowScore.
var byteLogFreq = func() (t [256]float64) {
	for i, n := range byteFreq {
		t[i] = math.Log(float64(n) + 1)
	}
	return t
}()

// find calls found for every pattern s contains (for each occurrence once or more,
// with the byte it starts at) and reports whether there was any. It probes the windows ending at odd offsets, and,
// for a text of odd length, the one ending one byte past it; g8 holds the 8 bytes
// that end there (zero bytes before the text's start). The text is read 8 bytes at
// a time, folded in one word (fold8), and probed four times per word: a byte at a
// time, reading and folding cost as much as the probes.
func (f *gramFilter) find(s string, found func(pattern int32, at int)) bool {
	bm := f.bitmap
	var g8 uint64
	any := false
	i := 0
	// probe is inlined at each of its six calls (TestPrefilterProbeInlined): called,
	// it was a fifth slower, and its cost is at the compiler's inlining budget.
	probe := func(g8 uint64, at int) {
		h := gramHash(uint32(g8))
		if bm[h/64]&(1<<(h%64)) != 0 && f.second(g8) && f.confirm(s, at, g8, found) {
			any = true
		}
	}
	for ; i+8 <= len(s); i += 8 {
		w := fold8(load8(s, i))
		// The windows ending at i+1, i+3, i+5 and i+7.
		probe(g8<<16|w>>48, i-2)
		probe(g8<<32|w>>32, i)
		probe(g8<<48|w>>16, i+2)
		probe(w, i+4)
		g8 = w
	}
	for ; i+1 < len(s); i += 2 {
		g8 = g8<<16 | uint64(fold[s[i]])<<8 | uint64(fold[s[i+1]])
		probe(g8, i-2)
	}
	if i < len(s) {
		g8 = g8<<16 | uint64(fold[s[i]])<<8
		probe(g8, i-2)
	}
	return any
}

// load8 reads the 8 bytes of s at i as a big-endian word (s[i] the highest byte),
// the order g8 keeps them in.
func load8(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// fold8 lower-cases the ASCII letters among the 8 bytes of w, as fold does each.
func fold8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low7 := w &^ highs // no lane carries into the next below
	geA := low7 + (0x80-'A')*ones
	gtZ := low7 + (0x80-'Z'-1)*ones
	upper := (geA &^ gtZ) &^ w & highs // bytes of 'A'..'Z', not of 0xc1..0xda
	return w | upper>>2                // 0x80>>2 is 'a'-'A'
}

// second reports whether the 4-byte window that ends g8 is a short
// pattern's, or g8 a long pattern's 8-byte window: whether confirm may find one.
func (f *gramFilter) second(g8 uint64) bool {
	h8, hs := long8Hash(g8), shortHash(g8)
	return f.long[h8/64]&(1<<(h8%64)) != 0 || f.short[hs/64]&(1<<(hs%64)) != 0
}

// confirm checks the patterns whose window (the last 4 bytes of g8)
// starts at s[at]; at is negative near the start of the text. It calls found for
// each pattern present.
func (f *gramFilter) confirm(s string, at int, g8 uint64, found func(pattern int32, at int)) bool {
	g := uint32(g8)
	b := gramHash(g) >> (gramBits - bucketBits)
	ok := false
	lo, hi := f.buckets[b], f.buckets[b+1]
	for k, eg := range f.grams[lo:hi] {
		if eg != g {
			continue
		}
		e := &f.entries[int(lo)+k]
		if e.long && e.g8 != g8 {
			continue
		}
		start := at - e.off
		if start >= 0 && start+len(e.lit) <= len(s) && equalFold(s[start:start+len(e.lit)], e.lit) {
			found(e.pattern, start)
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

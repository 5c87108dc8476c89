package rules

import (
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"unsafe"

	ahocorasick "github.com/petar-dambovaliev/aho-corasick"
)

// newAC builds the reference: an Aho-Corasick automaton reporting every pattern,
// overlapping ones included, ASCII case-insensitively.
func newAC(patterns []string) ahocorasick.AhoCorasick {
	b := ahocorasick.NewAhoCorasickBuilder(ahocorasick.Opts{
		AsciiCaseInsensitive: true,
		MatchKind:            ahocorasick.StandardMatch,
		DFA:                  true,
	})
	return b.Build(patterns)
}

// foundSet lists the patterns a finder reports, each with the first byte it was
// reported at, sorted by pattern.
func foundSet(each func(func(int32, int))) [][2]int {
	first := map[int32]int{}
	each(func(p int32, at int) {
		if a, ok := first[p]; !ok || at < a {
			first[p] = at
		}
	})
	out := [][2]int{}
	for p, at := range first {
		out = append(out, [2]int{int(p), at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// TestGramFilterIsExact: the gram filter finds exactly the patterns an Aho-Corasick
// automaton finds, and where each first starts, on pattern-laden and random texts,
// in any case and at the text's edges; patterns of 9 bytes or more (checked by
// their 8-byte windows too) among them.
func TestGramFilterIsExact(t *testing.T) {
	patterns := []string{"nvrm: xid (", "+0x", "link down", "sxid", "fallen off the bus", "é_x", "xid",
		"0000:3b:00", "nul\x00in a pattern", "(pci:0000"}
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
		wantSet := foundSet(func(add func(int32, int)) {
			it := b.IterOverlappingByte(unsafe.Slice(unsafe.StringData(s), len(s)))
			for m := it.Next(); m != nil; m = it.Next() {
				add(int32(m.Pattern()), m.Start())
			}
		})
		gotSet := foundSet(func(add func(int32, int)) { f.find(s, add) })
		if !reflect.DeepEqual(gotSet, wantSet) {
			t.Fatalf("find(%q) = %v, automaton finds %v", s, gotSet, wantSet)
		}
		want := len(wantSet) > 0
		if want {
			found++
		}
	}
	if found < 1000 {
		t.Fatalf("only %d texts held a pattern: the test does not exercise the filter", found)
	}
}

// TestEnginesOfOneSetAgree: a compiled set keeps what NewEngine reads of it (the
// regexes' literal sets), so a second engine over it, as a reload or a test builds,
// checks the same literals as the first.
func TestEnginesOfOneSetAgree(t *testing.T) {
	set := defaultPacksSet(t)
	first, second := NewEngine(set), NewEngine(set)
	if !reflect.DeepEqual(first.musts, second.musts) || !reflect.DeepEqual(first.companions, second.companions) {
		t.Fatal("a second engine over the same set checks other literals")
	}
	checked := 0
	for i, r := range set.Rules {
		var want, got [][]string
		if !r.regex.startAnchored {
			want = without(requiredLiteralSets(r.Regexp().String()), r.Literals)
		}
		for _, id := range first.musts[i] {
			got = append(got, first.sets[id].lits)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: literal sets %q, its regex has %q", r, got, want)
		}
		checked += len(got)
	}
	if checked == 0 {
		t.Fatal("no rule has literal sets to check: the test shows nothing")
	}
}

// TestSetsCheckedOnce: a literal set another set implies is not checked, identical
// sets of different rules are one set (a line checks it once), and a set the
// literal the prefilter found implies is held without a search.
func TestSetsCheckedOnce(t *testing.T) {
	cases := []struct {
		sets [][]string
		lits []string
		want [][]string
	}{
		// {"err", "time"} holds wherever {"error", "timeout"} does.
		{[][]string{{"err", "time"}, {"error", "timeout"}}, nil, [][]string{{"error", "timeout"}}},
		{[][]string{{"error", "timeout"}, {"err", "time"}}, nil, [][]string{{"error", "timeout"}}},
		// Sets that imply each other: the first stays.
		{[][]string{{"abc"}, {"abc"}}, nil, [][]string{{"abc"}}},
		// Neither implies the other.
		{[][]string{{"err"}, {"fail"}}, nil, [][]string{{"err"}, {"fail"}}},
		// Every literal of the prefilter's holds "nvrm: ".
		{[][]string{{"nvrm: "}, {"xid"}}, []string{"NVRM: Xid (", "NVRM: GPU"}, [][]string{{"xid"}}},
	}
	for _, c := range cases {
		if got := without(c.sets, c.lits); !reflect.DeepEqual(got, c.want) {
			t.Errorf("without(%q, %q) = %q, want %q", c.sets, c.lits, got, c.want)
		}
	}

	e := NewEngine(defaultPacksSet(t))
	users := map[int32]int{}
	for _, refs := range e.musts {
		for _, id := range refs {
			users[id]++
		}
	}
	id := slices.IndexFunc(e.sets, func(s litSet) bool { return slices.Equal(s.lits, []string{": sxid (pci:"}) })
	if id < 0 || users[int32(id)] < 3 {
		t.Errorf("the SXid rules' set {\": sxid (pci:\"} is not one set they share (index %d, %d users)", id, users[int32(id)])
	}
	if len(e.sets) >= sumLen(e) {
		t.Errorf("%d sets for %d references: no set is shared", len(e.sets), sumLen(e))
	}
	p := slices.Index(e.patterns, " nic link is up")
	if p < 0 || len(e.implied[p]) == 0 {
		t.Fatalf("the pattern \" nic link is up\" implies none of its targets' sets (link-flap's companion needs one of \" nic link is up\", ...)")
	}
	for _, id := range e.implied[p] {
		if !e.sets[id].in("eno1 NIC Link is Up") {
			t.Errorf("implied set %q is not held by the pattern's own text", e.sets[id].lits)
		}
	}
}

func sumLen(e *Engine) int {
	n := 0
	for _, refs := range e.musts {
		n += len(refs)
	}
	for _, cs := range e.companions {
		for _, c := range cs {
			n += len(c.musts)
		}
	}
	return n
}

// defaultPacksSet compiles the built-in packs as the engine reads them.
func defaultPacksSet(t *testing.T) *Set {
	t.Helper()
	ps, err := Loader{MatchingOnly: true}.LoadPaths("packs")
	if err != nil {
		t.Fatal(err)
	}
	set, err := Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestFold8: fold8 folds every byte value in every lane as fold does.
func TestFold8(t *testing.T) {
	for c := 0; c < 256; c++ {
		for lane := 0; lane < 8; lane++ {
			// The other lanes hold bytes at the edges of the letters' range.
			w := uint64(0x40_5a_5b_c1_41_da_7a_ff)
			w = w&^(0xff<<(8*lane)) | uint64(c)<<(8*lane)
			got := fold8(w)
			for k := 0; k < 8; k++ {
				in, out := byte(w>>(8*k)), byte(got>>(8*k))
				if fold[in] != out {
					t.Fatalf("fold8(%#x): byte %d: %#x became %#x, want %#x", w, k, in, out, fold[in])
				}
			}
		}
	}
}

// TestShortCollisionsRejected: a window whose first-level bit a short pattern's
// window set by chance (another window of the same gramHash) is rejected by the
// second level, not compared: the short bitmap is keyed by a hash of its own. Keyed
// by gramHash, it passed every such window. The patterns of 3 and 4 bytes stand for
// 256 windows each; those that a byte before the pattern makes share one bit there.
func TestShortCollisionsRejected(t *testing.T) {
	f := newGramFilter([]string{"xid", "fail", "oops", "bug ", "+0x"})
	short := map[uint32]bool{} // the first-level hashes of the short patterns' windows
	for _, e := range f.entries {
		short[gramHash(e.g)] = true
	}
	bits := 0
	for _, w := range f.short {
		for ; w != 0; w &= w - 1 {
			bits++
		}
	}
	// At most two windows of each of the three 4-byte patterns, and the windows of
	// the two 3-byte ones: the one a byte before it stands for (one key) and the 256
	// the byte after it makes (their last three bytes differ).
	if want := 3*2 + 2*257; bits > want {
		t.Errorf("the short bitmap has %d bits set, want at most %d", bits, want)
	}
	r := rand.New(rand.NewSource(1))
	collided, passed := 0, 0
	for collided < 2000 {
		g := r.Uint32()
		if !short[gramHash(g)] || slices.ContainsFunc(f.entries, func(e gramEntry) bool { return e.g == g }) {
			continue
		}
		collided++
		if f.second(uint64(g)) {
			passed++
		}
	}
	if passed > collided/20 {
		t.Errorf("%d of %d windows that share a short pattern's first-level hash passed the second level, want at most 5 %%", passed, collided)
	}
}

// TestSharedWindows: the window counts are, for each 4-byte window, the number of
// patterns that hold it (a pattern holding it twice counts once), as a map counts
// them; among them windows that differ in their first byte only.
func TestSharedWindows(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var patterns []string
	for i := 0; i < 3000; i++ {
		b := make([]byte, 3+r.Intn(30))
		for j := range b {
			b[j] = "abcdxyz :"[r.Intn(9)]
		}
		if i%3 == 0 {
			b[0] = byte(r.Intn(256)) // the same last three bytes behind any first
		}
		patterns = append(patterns, string(b))
	}
	want := map[uint32]int{}
	for _, p := range patterns {
		seen := map[uint32]bool{}
		for j := 0; j+4 <= len(p); j++ {
			if w := window4(p, j); !seen[w] {
				seen[w] = true
				want[w]++
			}
		}
	}
	wc := sharedWindows(patterns)
	for w, n := range want {
		if got := wc.slots[wc.slot(w)].count; int(got) != n {
			t.Fatalf("window %q: count %d, want %d", string([]byte{byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w)}), got, n)
		}
	}
	if got := wc.slots[wc.slot(window4("qqqq", 0))].count; got != 0 {
		t.Errorf("a window no pattern holds: count %d", got)
	}
}

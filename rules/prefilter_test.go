package rules

import (
	"math/rand"
	"reflect"
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
		var want litSets
		if !r.regex.startAnchored {
			want = compileSets(without(requiredLiteralSets(r.Regexp().String()), r.Literals))
		}
		if !reflect.DeepEqual(first.musts[i], want) {
			t.Errorf("%s: literal sets %v, its regex has %v", r, first.musts[i], want)
		}
		checked += len(first.musts[i])
	}
	if checked == 0 {
		t.Fatal("no rule has literal sets to check: the test shows nothing")
	}
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

package cri

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseLine checks that ParseLine never panics, that errors are
// *ParseError values wrapping a sentinel, that its timestamps agree with
// time.Parse, and that an accepted line survives AppendFormat.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"2024-01-02T03:04:05.123456789Z stdout F message\n",
		"2024-01-02T03:04:05.123456789Z stderr P part \n",
		"2024-01-02T04:04:05.5+01:00 stdout F:x m",
		"2024-01-02T03:04:05Z stdout F",
		"2024-01-02T03:04:05Z stdout F \n\n",
		"2024-02-30T03:04:05Z stdout F m",
		"2024-01-02T03:04:05.1234567891Z stdout F m",
		"x y z",
		"",
	} {
		f.Add([]byte(s))
	}
	sentinels := []error{ErrEmpty, ErrMissingField, ErrTimestamp, ErrStream, ErrTag}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseLine(b)
		if sp := bytes.IndexByte(b, ' '); sp >= 0 {
			want, werr := time.Parse(time.RFC3339Nano, string(b[:sp]))
			got, ok := parseTime(b[:sp])
			if ok != (werr == nil) || ok && !got.Equal(want) {
				t.Fatalf("timestamp %q: %v %v; time.Parse %v %v", b[:sp], got, ok, want, werr)
			}
		}
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%T %v is not a *ParseError", err, err)
			}
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known || !reflect.DeepEqual(e, Entry{}) {
				t.Fatalf("error %v with entry %+v", err, e)
			}
			return
		}
		if e.Stream != Stdout && e.Stream != Stderr {
			t.Fatalf("stream %q", e.Stream)
		}
		first, _, _ := strings.Cut(e.Tags, ":")
		if e.Partial != (first == "P") || (first != "P" && first != "F") {
			t.Fatalf("tags %q, partial %v", e.Tags, e.Partial)
		}
		out := e.AppendFormat(nil)
		back, err := ParseLine(out)
		if err != nil {
			t.Fatalf("formatted %q does not parse: %v", out, err)
		}
		if !equalEntries(back, e) {
			t.Fatalf("round trip via %q:\n got  %+v\n want %+v", out, back, e)
		}
	})
}

// FuzzReassembler splits arbitrary text into entries and checks the
// reassembler's bounds: no line over the cap, a cut never splits a UTF-8
// sequence, and everything not truncated comes back intact.
func FuzzReassembler(f *testing.F) {
	f.Add([]byte("abc|def|ghi"), []byte{1, 1, 0}, uint16(20))
	f.Add([]byte("€€€€€|€€€€|€"), []byte{1, 0, 0}, uint16(14))
	f.Fuzz(func(t *testing.T, text []byte, flags []byte, max uint16) {
		r := NewReassembler(int(max))
		parts := strings.Split(string(text), "|")
		var joined [2]strings.Builder
		check := func(l Line) {
			if len(l.Message) > r.MaxSize() {
				t.Fatalf("%d bytes over cap %d", len(l.Message), r.MaxSize())
			}
			i := streamIndex(l.Stream)
			whole := joined[i].String()
			joined[i].Reset()
			if l.Truncated {
				kept := strings.TrimSuffix(l.Message, TruncationMark)
				if !strings.HasPrefix(whole, kept) || len(kept) == len(l.Message) {
					t.Fatalf("truncated %q is not a marked prefix of %q", l.Message, whole)
				}
				if utf8.ValidString(whole) && !utf8.ValidString(kept) {
					t.Fatalf("cut splits a rune: %q", kept)
				}
			} else if l.Message != whole {
				t.Fatalf("line %q, want %q", l.Message, whole)
			}
		}
		for i, p := range parts {
			var fl byte
			if i < len(flags) {
				fl = flags[i]
			}
			e := Entry{Stream: Stdout, Partial: fl&1 == 1, Message: p}
			if fl&2 == 2 {
				e.Stream = Stderr
			}
			si := streamIndex(e.Stream)
			if r.streams[si].discarding {
				// The rest of an already truncated line.
			} else {
				joined[si].WriteString(p)
			}
			if l, ok := r.Add(e); ok {
				check(l)
			}
		}
		for _, l := range r.Flush() {
			if !l.Incomplete {
				t.Fatalf("flushed %+v", l)
			}
			check(l)
		}
	})
}

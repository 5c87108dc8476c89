package kmsg

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/iotest"
	"time"
)

// FuzzParse checks that Parse never panics, that its errors are
// *ParseError values wrapping a sentinel, and that an accepted record
// survives escaping and formatting: Unescape(Escape(Message)) == Message,
// and Parse(AppendFormat(r)) == r.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"6,1804,47700428483,-;wlp4s0: associated\n",
		"4,2,3,-,caller=T123;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n",
		"6,438,377378,-;acpi PNP0A08:00: _OSC\n SUBSYSTEM=acpi\n DEVICE=+acpi:PNP0A08:00\n",
		`6,1,1,-;initrd=\x5cucode.img \x0a \xZZ \x4` + "\n",
		"4,311,209670,c;  #1  #3  #5  #7\n",
		"6,1,1,-,foo,caller=C1,caller=T2;m\n K\\x3d=v\n",
		"10,1,1000000,-,caller=T1;new\nline\n",
		"2047,18446744073709551615,9223372036854775,+;x",
		"12,460,1322026586,-;hey\n DE\x00\x00",
		"21,\r\r1,1,2,;\r8,\xf5: ;0\n\\x\n \x00\x00\\x:\n",
		"",
		";",
		"6,1,1;m",
	} {
		f.Add([]byte(s))
	}
	// The peer inputs too, when they are here (no skip: seeds are extra).
	if root, err := repoRoot(); err == nil {
		base := filepath.Join(root, "..", "shared", "peer-tests", "kmsg")
		for _, name := range []string{"util-linux/kmsg-input", "util-linux/cid-kmsg-input", "util-linux/cid-kmsg-newlines"} {
			if b, err := os.ReadFile(filepath.Join(base, name)); err == nil {
				for _, rec := range bytes.Split(b, []byte{0}) {
					f.Add(rec)
				}
			}
		}
		if ents, err := os.ReadDir(filepath.Join(base, "systemd")); err == nil {
			for _, e := range ents {
				if b, err := os.ReadFile(filepath.Join(base, "systemd", e.Name())); err == nil && e.Name() != "README.md" {
					f.Add(b)
				}
			}
		}
	}
	sentinels := []error{ErrEmpty, ErrNoSeparator, ErrMissingField, ErrSyntax, ErrRange, ErrDict}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if !reflect.DeepEqual(r, Record{}) {
				t.Fatalf("non-zero record with error: %+v", r)
			}
			return
		}
		if r.Level > LevelDebug || r.LastSeq != r.Seq || r.Flags == "" || r.Monotonic < 0 || r.Monotonic%time.Microsecond != 0 {
			t.Fatalf("invariants broken: %+v", r)
		}
		if got := Unescape(Escape(r.Message)); got != r.Message {
			t.Fatalf("message %q does not round-trip through escaping: %q", r.Message, got)
		}
		out := r.AppendFormat(nil)
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("formatted record %q does not parse: %v", out, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %q via %q:\n got  %+v\n want %+v", b, out, back, r)
		}
		if again := back.AppendFormat(nil); !bytes.Equal(again, out) {
			t.Fatalf("formatting is not stable: %q then %q", out, again)
		}
	})
}

// FuzzReaderStream feeds arbitrary bytes to a stream reader, whole and one
// byte per read: it must end with io.EOF, never panic or loop, and account
// for what it delivered.
func FuzzReaderStream(f *testing.F) {
	f.Add([]byte("6,1,1,-;a\n K=v\n\x006,2,2,-;b\n"), uint16(64))
	f.Add([]byte(" orphan\n\n6,5,1,c;x\n6,3,1,+;y\n6,9,1,-;z"), uint16(8))
	f.Add([]byte("6,1,1,-;"+string(bytes.Repeat([]byte("x"), 300))+"\n A=1\n"), uint16(100))
	f.Fuzz(func(t *testing.T, b []byte, max uint16) {
		for _, merge := range []bool{false, true} {
			for _, src := range []io.Reader{bytes.NewReader(b), iotest.OneByteReader(bytes.NewReader(b))} {
				rd := NewReader(src, Options{MaxRecordSize: int(max), MergeContinuations: merge, BootTime: time.Unix(1, 0)})
				n := 0
				for ; n <= len(b)+1; n++ {
					_, err := rd.Next(context.Background())
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("Next: %v", err)
					}
				}
				if n > len(b) {
					t.Fatalf("%d records from %d bytes", n, len(b))
				}
				if st := rd.Stats(); st.Records != uint64(n) {
					t.Fatalf("stats %+v after %d records", st, n)
				}
			}
		}
	})
}

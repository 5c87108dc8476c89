package kmsg

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// equalRecords compares records field by field, times with Equal.
func equalRecords(a, b Record) bool {
	if !a.Time.Equal(b.Time) {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Record
	}{
		{
			name: "basic",
			in:   "6,1804,47700428483,-;wlp4s0: associated\n",
			want: Record{Level: LevelInfo, Facility: FacilityKern, Seq: 1804, LastSeq: 1804, Monotonic: 47700428483 * time.Microsecond, Flags: "-", Message: "wlp4s0: associated"},
		},
		{
			name: "no trailing newline",
			in:   "3,7,0,-;x",
			want: Record{Level: LevelErr, Seq: 7, LastSeq: 7, Flags: "-", Message: "x"},
		},
		{
			name: "empty message",
			in:   "6,1,2,-;\n",
			want: Record{Level: LevelInfo, Seq: 1, LastSeq: 1, Monotonic: 2 * time.Microsecond, Flags: "-"},
		},
		{
			name: "facility and level",
			in:   "30,5,9,-;systemd[1]: started\n",
			want: Record{Level: LevelInfo, Facility: FacilityDaemon, Seq: 5, LastSeq: 5, Monotonic: 9 * time.Microsecond, Flags: "-", Message: "systemd[1]: started"},
		},
		{
			name: "largest faclev",
			in:   "2047,0,0,-;m",
			want: Record{Level: LevelDebug, Facility: 255, Flags: "-", Message: "m"},
		},
		{
			name: "caller",
			in:   "4,2,3,-,caller=T123;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
			want: Record{Level: LevelWarn, Seq: 2, LastSeq: 2, Monotonic: 3 * time.Microsecond, Flags: "-", Caller: "T123",
				Message: "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
		},
		{
			name: "unknown extra fields kept",
			in:   "6,2,3,-,foo=bar,caller=C4,x;m",
			want: Record{Level: LevelInfo, Seq: 2, LastSeq: 2, Monotonic: 3 * time.Microsecond, Flags: "-", Caller: "C4", Fields: []string{"foo=bar", "x"}, Message: "m"},
		},
		{
			name: "continuation",
			in:   "4,311,209670,c;  #1  #3  #5  #7\n",
			want: Record{Level: LevelWarn, Seq: 311, LastSeq: 311, Monotonic: 209670 * time.Microsecond, Flags: "c", Message: "  #1  #3  #5  #7"},
		},
		{
			name: "semicolons and commas in message",
			in:   "6,1,1,-;a;b,c;d\n",
			want: Record{Level: LevelInfo, Seq: 1, LastSeq: 1, Monotonic: time.Microsecond, Flags: "-", Message: "a;b,c;d"},
		},
		{
			name: "escapes",
			in:   `6,1,1,-;initrd=\x5cucode.img tab\x09nl\x0aend\xF0\x9f\x98\x80` + "\n",
			want: Record{Level: LevelInfo, Seq: 1, LastSeq: 1, Monotonic: time.Microsecond, Flags: "-", Message: "initrd=\\ucode.img tab\tnl\nend\U0001F600"},
		},
		{
			name: "bad escapes kept",
			in:   `6,1,1,-;a\x4 \xzz \ b\x` + "\n",
			want: Record{Level: LevelInfo, Seq: 1, LastSeq: 1, Monotonic: time.Microsecond, Flags: "-", Message: `a\x4 \xzz \ b\x`},
		},
		{
			name: "dictionary",
			in:   "6,438,377378,-;acpi PNP0A08:00: _OSC: OS supports\n SUBSYSTEM=acpi\n DEVICE=+acpi:PNP0A08:00\n",
			want: Record{Level: LevelInfo, Seq: 438, LastSeq: 438, Monotonic: 377378 * time.Microsecond, Flags: "-", Message: "acpi PNP0A08:00: _OSC: OS supports",
				Dict: []DictEntry{{"SUBSYSTEM", "acpi"}, {"DEVICE", "+acpi:PNP0A08:00"}}},
		},
		{
			name: "dictionary escapes and '=' in value, unterminated last line",
			in:   "6,1,1,-;m\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n K=a=b\\x0ac",
			want: Record{Level: LevelInfo, Seq: 1, LastSeq: 1, Monotonic: time.Microsecond, Flags: "-", Message: "m",
				Dict: []DictEntry{{"SUBSYSTEM", "pci"}, {"DEVICE", "+pci:0000:3b:00.0"}, {"K", "a=b\nc"}}},
		},
		{
			name: "lines not starting with a space end the record",
			in:   "10,1,1000000,-,caller=T1;new\nline\n K=v\n",
			want: Record{Level: LevelCrit, Facility: FacilityUser, Seq: 1, LastSeq: 1, Monotonic: time.Second, Flags: "-", Caller: "T1", Message: "new"},
		},
		{
			name: "trailing empty line",
			in:   "15,2942,207987439,-,caller=T1234567;debug priority\n\n",
			want: Record{Level: LevelDebug, Facility: FacilityUser, Seq: 2942, LastSeq: 2942, Monotonic: 207987439 * time.Microsecond, Flags: "-", Caller: "T1234567", Message: "debug priority"},
		},
		{
			name: "max seq",
			in:   "6,18446744073709551615,9223372036854775,+;m",
			want: Record{Level: LevelInfo, Seq: 1<<64 - 1, LastSeq: 1<<64 - 1, Monotonic: 9223372036854775 * time.Microsecond, Flags: "+", Message: "m"},
		},
		{
			name: "raw control and invalid UTF-8 bytes kept",
			in:   "6,1,1,-;a\x00b\xffc\r\n",
			want: Record{Level: LevelInfo, Seq: 1, LastSeq: 1, Monotonic: time.Microsecond, Flags: "-", Message: "a\x00b\xffc\r"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if !equalRecords(got, tc.want) {
				t.Errorf("Parse(%q)\n got  %+v\n want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		err   error
		field string
	}{
		{"empty", "", ErrEmpty, "record"},
		{"no separator", "6,1,1,-\n", ErrNoSeparator, "header"},
		{"separator after newline", "6,1,1,-\n;msg", ErrNoSeparator, "header"},
		{"plain text", "hello world", ErrNoSeparator, "header"},
		{"three fields", "6,1,1;msg", ErrMissingField, "header"},
		{"two fields", "6,1;msg", ErrMissingField, "header"},
		{"empty faclev", ",1,1,-;msg", ErrSyntax, "faclev"},
		{"faclev sign", "+6,1,1,-;msg", ErrSyntax, "faclev"},
		{"faclev too big", "2048,1,1,-;msg", ErrRange, "faclev"},
		{"faclev space", " 6,1,1,-;msg", ErrSyntax, "faclev"},
		{"seq not a number", "6,x,1,-;msg", ErrSyntax, "seq"},
		{"seq negative", "6,-1,1,-;msg", ErrSyntax, "seq"},
		{"seq overflow", "6,18446744073709551616,1,-;msg", ErrRange, "seq"},
		{"seq with carriage returns", "21,\r\r1,1,2,;msg\n", ErrSyntax, "seq"},
		{"usec hex", "6,1,0x10,-;msg", ErrSyntax, "usec"},
		{"usec overflows a Duration", "6,1,9223372036854776,-;msg", ErrRange, "usec"},
		{"empty flags", "6,1,1,;msg", ErrSyntax, "flags"},
		{"empty caller", "6,1,1,-,caller=;msg", ErrSyntax, "caller"},
		{"dictionary without '='", "6,1,1,-;msg\n DEVICE\n", ErrDict, "dict"},
		{"dictionary with empty key", "6,1,1,-;msg\n =x\n", ErrDict, "dict"},
		{"dictionary line of NULs", "12,460,1322026586,-;hey\n DEVICE=c1:3\n DE\x00\x00\x00", ErrDict, "dict"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tc.in, r)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("Parse(%q): %v, want %v", tc.in, err, tc.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): %T is not a *ParseError", tc.in, err)
			}
			if pe.Field != tc.field {
				t.Errorf("Parse(%q): field %q, want %q (%v)", tc.in, pe.Field, tc.field, err)
			}
			if !strings.HasPrefix(err.Error(), "kmsg: ") {
				t.Errorf("error text %q", err)
			}
			if !reflect.DeepEqual(r, Record{}) {
				t.Errorf("Parse(%q) returned a non-zero record with its error: %+v", tc.in, r)
			}
		})
	}
}

func TestParseErrorOffset(t *testing.T) {
	_, err := Parse([]byte("6,12,abc,-;m"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Offset != 5 || pe.Value != "abc" {
		t.Fatalf("got %#v", err)
	}
	long := "6,1,1,-;m\n " + strings.Repeat("x", 1000) + "\n"
	_, err = Parse([]byte(long))
	if !errors.As(err, &pe) || pe.Offset != 10 || len(pe.Value) != 64 {
		t.Fatalf("got %#v", err)
	}
}

func TestHugeDictionary(t *testing.T) {
	// Like systemd's oss-fuzz-33881 reproducer: a ~1 MB DEVICE value.
	val := "+subsystem:tty/t" + strings.Repeat("0", 1<<20) + "\xe9" + strings.Repeat("0", 1000)
	in := "8,0,1;2,0,7;\n DEVICE=" + val + "\n"
	if _, err := Parse([]byte(in)); !errors.Is(err, ErrMissingField) {
		t.Errorf("systemd's header: %v, want ErrMissingField", err)
	}
	r, err := Parse([]byte("8,0,1,-;x\n DEVICE=" + val + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Lookup("DEVICE"); v != val {
		t.Errorf("DEVICE value of %d bytes, want %d", len(v), len(val))
	}
	if r.Facility != FacilityKern+1 || r.Level != LevelEmerg {
		t.Errorf("faclev 8 = %v.%v", r.Facility, r.Level)
	}
}

func TestNames(t *testing.T) {
	levels := []string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}
	for i, n := range levels {
		if got := Level(i).String(); got != n {
			t.Errorf("Level(%d) = %q, want %q", i, got, n)
		}
		if l, err := ParseLevel(n); err != nil || l != Level(i) {
			t.Errorf("ParseLevel(%q) = %v, %v", n, l, err)
		}
	}
	for in, want := range map[string]Level{"warning": LevelWarn, "ERROR": LevelErr, "3": LevelErr, "panic": LevelEmerg, "critical": LevelCrit} {
		if l, err := ParseLevel(in); err != nil || l != want {
			t.Errorf("ParseLevel(%q) = %v, %v, want %v", in, l, err, want)
		}
	}
	for _, bad := range []string{"", "8", "-1", "loud"} {
		if _, err := ParseLevel(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseLevel(%q): %v", bad, err)
		}
	}
	if got := Level(9).String(); got != "9" {
		t.Errorf("Level(9) = %q", got)
	}
	facilities := map[Facility]string{0: "kern", 1: "user", 2: "mail", 3: "daemon", 4: "auth", 5: "syslog", 6: "lpr", 7: "news",
		8: "uucp", 9: "cron", 10: "authpriv", 11: "ftp", 12: "res0", 13: "res1", 14: "res2", 15: "res3",
		16: "local0", 18: "local2", 23: "local7", 24: "24", 255: "255"}
	for f, n := range facilities {
		if got := f.String(); got != n {
			t.Errorf("Facility(%d) = %q, want %q", f, got, n)
		}
		if g, err := ParseFacility(n); err != nil || g != f {
			t.Errorf("ParseFacility(%q) = %v, %v", n, g, err)
		}
	}
	if _, err := ParseFacility("nope"); !errors.Is(err, ErrSyntax) {
		t.Errorf("ParseFacility(nope): %v", err)
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ raw, escaped string }{
		{"", ""},
		{"plain text", "plain text"},
		{`a\b`, `a\x5cb`},
		{"tab\tnl\ncr\r", `tab\x09nl\x0acr\x0d`},
		{"\x00\x1f\x7f\x80\xff", `\x00\x1f\x7f\x80\xff`},
		{"héllo", `h\xc3\xa9llo`},
	}
	for _, tc := range tests {
		if got := Escape(tc.raw); got != tc.escaped {
			t.Errorf("Escape(%q) = %q, want %q", tc.raw, got, tc.escaped)
		}
		if got := Unescape(tc.escaped); got != tc.raw {
			t.Errorf("Unescape(%q) = %q, want %q", tc.escaped, got, tc.raw)
		}
	}
	if got := Unescape(`\X41\x4A\x4a`); got != `\X41JJ` {
		t.Errorf("Unescape = %q", got)
	}
}

func TestAppendFormat(t *testing.T) {
	r := Record{Level: LevelErr, Facility: FacilityDaemon, Seq: 42, Monotonic: 1500 * time.Millisecond, Flags: "-", Caller: "T7",
		Fields: []string{"x=y"}, Message: "a;b\\c\n", Dict: []DictEntry{{"SUBSYSTEM", "pci"}, {"K=1", "v\x01"}}}
	want := "27,42,1500000,-,caller=T7,x=y;a;b\\x5cc\\x0a\n SUBSYSTEM=pci\n K\\x3d1=v\\x01\n"
	if got := string(r.AppendFormat(nil)); got != want {
		t.Fatalf("AppendFormat:\n got  %q\n want %q", got, want)
	}
	back, err := Parse([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	r.LastSeq = r.Seq
	if !equalRecords(back, r) {
		t.Errorf("round trip:\n got  %+v\n want %+v", back, r)
	}
}

func TestRecordHelpers(t *testing.T) {
	r := Record{Facility: FacilityUser, Level: LevelWarn, Monotonic: 2 * time.Second, Flags: "c",
		Dict: []DictEntry{{"A", "1"}, {"A", "2"}}}
	if r.Priority() != 12 {
		t.Errorf("Priority = %d", r.Priority())
	}
	if !r.IsContinuation() {
		t.Error("flags c is a continuation")
	}
	if v, ok := r.Lookup("A"); !ok || v != "1" {
		t.Errorf("Lookup(A) = %q, %v (first wins)", v, ok)
	}
	if _, ok := r.Lookup("B"); ok {
		t.Error("Lookup(B) found")
	}
	boot := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := r.WallTime(boot); !got.Equal(boot.Add(2 * time.Second)) {
		t.Errorf("WallTime = %v", got)
	}
}

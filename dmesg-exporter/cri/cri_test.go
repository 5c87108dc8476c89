package cri

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func equalEntries(a, b Entry) bool {
	if !a.Time.Equal(b.Time) {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Entry
	}{
		{"full", "2024-01-02T03:04:05.123456789Z stdout F message\n",
			Entry{Time: ts("2024-01-02T03:04:05.123456789Z"), Stream: Stdout, Tags: "F", Message: "message"}},
		{"partial", "2024-01-02T03:04:05.123456789Z stderr P part one \n",
			Entry{Time: ts("2024-01-02T03:04:05.123456789Z"), Stream: Stderr, Partial: true, Tags: "P", Message: "part one "}},
		{"no newline", "2024-01-02T03:04:05Z stdout F x",
			Entry{Time: ts("2024-01-02T03:04:05Z"), Stream: Stdout, Tags: "F", Message: "x"}},
		{"short fraction", "2019-04-30T02:12:41.8443515Z stdout F message",
			Entry{Time: time.Date(2019, 4, 30, 2, 12, 41, 844351500, time.UTC), Stream: Stdout, Tags: "F", Message: "message"}},
		{"offset", "2024-01-02T04:04:05.5+01:00 stdout F m",
			Entry{Time: time.Date(2024, 1, 2, 3, 4, 5, 5e8, time.UTC), Stream: Stdout, Tags: "F", Message: "m"}},
		{"negative offset", "2024-01-01T22:04:05-05:00 stderr F m",
			Entry{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Stream: Stderr, Tags: "F", Message: "m"}},
		{"empty message with space", "2024-01-02T03:04:05Z stdout F \n",
			Entry{Time: ts("2024-01-02T03:04:05Z"), Stream: Stdout, Tags: "F"}},
		{"empty message without space", "2024-01-02T03:04:05Z stdout F\n",
			Entry{Time: ts("2024-01-02T03:04:05Z"), Stream: Stdout, Tags: "F"}},
		{"spaces kept", "2024-01-02T03:04:05Z stdout F   a  b  \n",
			Entry{Time: ts("2024-01-02T03:04:05Z"), Stream: Stdout, Tags: "F", Message: "  a  b  "}},
		{"more tags", "2024-01-02T03:04:05Z stdout P:x:y m",
			Entry{Time: ts("2024-01-02T03:04:05Z"), Stream: Stdout, Partial: true, Tags: "P:x:y", Message: "m"}},
		{"carriage return and bytes kept", "2024-01-02T03:04:05Z stdout F a\r\x00\xff\n",
			Entry{Time: ts("2024-01-02T03:04:05Z"), Stream: Stdout, Tags: "F", Message: "a\r\x00\xff"}},
		{"only one newline removed", "2024-01-02T03:04:05Z stdout F a\n\n",
			Entry{Time: ts("2024-01-02T03:04:05Z"), Stream: Stdout, Tags: "F", Message: "a\n"}},
		{"leap day", "2024-02-29T23:59:59.999999999Z stdout F m",
			Entry{Time: time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC), Stream: Stdout, Tags: "F", Message: "m"}},
		{"comma fraction", "2024-01-02T03:04:05,25Z stdout F m",
			Entry{Time: time.Date(2024, 1, 2, 3, 4, 5, 25e7, time.UTC), Stream: Stdout, Tags: "F", Message: "m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLine([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", tc.in, err)
			}
			if !equalEntries(got, tc.want) {
				t.Errorf("ParseLine(%q)\n got  %+v\n want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseLineErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		err   error
		field string
	}{
		{"empty", "", ErrEmpty, "line"},
		{"newline only", "\n", ErrEmpty, "line"},
		{"one field", "2024-01-02T03:04:05Z", ErrMissingField, "line"},
		{"two fields", "2024-01-02T03:04:05Z stdout", ErrMissingField, "line"},
		{"not a time", "yesterday stdout F m", ErrTimestamp, "timestamp"},
		{"space in time", "2024-01-02 03:04:05Z stdout F m", ErrTimestamp, "timestamp"},
		{"no zone", "2024-01-02T03:04:05 stdout F m", ErrTimestamp, "timestamp"},
		{"bad month", "2024-13-02T03:04:05Z stdout F m", ErrTimestamp, "timestamp"},
		{"bad day", "2023-02-29T03:04:05Z stdout F m", ErrTimestamp, "timestamp"},
		{"bad hour", "2024-01-02T24:04:05Z stdout F m", ErrTimestamp, "timestamp"},
		{"empty fraction", "2024-01-02T03:04:05.Z stdout F m", ErrTimestamp, "timestamp"},
		{"stream", "2024-01-02T03:04:05Z stdin F m", ErrStream, "stream"},
		{"stream case", "2024-01-02T03:04:05Z STDOUT F m", ErrStream, "stream"},
		{"double space", "2024-01-02T03:04:05Z  stdout F m", ErrStream, "stream"},
		{"tag", "2024-01-02T03:04:05Z stdout X m", ErrTag, "tags"},
		{"empty tag", "2024-01-02T03:04:05Z stdout  m", ErrTag, "tags"},
		{"long tag", "2024-01-02T03:04:05Z stdout FF m", ErrTag, "tags"},
		{"docker json", `{"log":"a b\n","stream":"stdout","time":"2024-01-02T03:04:05Z"}`, ErrTimestamp, "timestamp"},
		{"docker json without spaces", `{"log":"m\n","stream":"stdout"}`, ErrMissingField, "line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseLine([]byte(tc.in))
			if !errors.Is(err, tc.err) {
				t.Fatalf("ParseLine(%q) = %+v, %v; want %v", tc.in, e, err, tc.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field != tc.field || !strings.HasPrefix(err.Error(), "cri: ") {
				t.Errorf("ParseLine(%q): %#v", tc.in, err)
			}
			if !reflect.DeepEqual(e, Entry{}) {
				t.Errorf("non-zero entry with error: %+v", e)
			}
		})
	}
}

func TestAppendFormat(t *testing.T) {
	e := Entry{Time: time.Date(2024, 1, 2, 3, 4, 5, 120000000, time.UTC), Stream: Stderr, Partial: true, Message: "a b "}
	got := string(e.AppendFormat(nil))
	if want := "2024-01-02T03:04:05.12Z stderr P a b \n"; got != want {
		t.Errorf("AppendFormat = %q, want %q", got, want)
	}
	back, err := ParseLine([]byte(got))
	e.Tags = "P"
	if err != nil || !equalEntries(back, e) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	e = Entry{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Stream: Stdout, Tags: "F:x", Message: "m"}
	if got := string(e.AppendFormat(nil)); got != "2024-01-02T03:04:05Z stdout F:x m\n" {
		t.Errorf("AppendFormat = %q", got)
	}
}

// The fast timestamp path agrees with time.Parse.
func TestParseTimeMatchesTimeParse(t *testing.T) {
	for _, s := range []string{
		"2024-01-02T03:04:05Z", "2024-01-02T03:04:05.1Z", "2024-01-02T03:04:05.123456789Z",
		"2024-01-02T03:04:05.1234567891Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
		"2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2024-01-02T03:04:60Z", "2024-01-02T03:04:05.Z",
		"2024-01-02t03:04:05Z", "2024-01-02T03:04:05z", "2024-1-02T03:04:05Z", "+024-01-02T03:04:05Z",
		"2024-01-02T03:04:05.12a4Z", "2024-01-02T03:04:05+00:00", "2024-01-02T03:04:05.5-00:30",
	} {
		want, werr := time.Parse(time.RFC3339Nano, s)
		got, ok := parseTime([]byte(s))
		if ok != (werr == nil) || (ok && !got.Equal(want)) {
			t.Errorf("parseTime(%q) = %v, %v; time.Parse = %v, %v", s, got, ok, want, werr)
		}
	}
}

func TestParseFile(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	r := NewReassembler(0)
	var lines []Line
	n := 0
	for sc.Scan() {
		e, err := ParseLine(sc.Bytes())
		if err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		n++
		if l, ok := r.Add(e); ok {
			lines = append(lines, l)
		}
	}
	if n != 10 {
		t.Fatalf("%d entries", n)
	}
	want := []struct {
		stream  Stream
		entries int
		message string
	}{
		{Stdout, 1, "[rank0] step 100 loss 2.3141"},
		{Stdout, 1, "[rank0] step 101 loss 2.3122"},
		{Stderr, 3, "NCCL WARN NET/IB : Got completion from peer 10.0.0.17<47530> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.16 remoteGid ::ffff:10.0.0.17"},
		{Stderr, 1, "RuntimeError: CUDA error: an illegal memory access was encountered"},
		{Stdout, 1, "timestamp with an offset"},
		{Stdout, 1, ""},
		{Stdout, 1, "  indented, with  double  spaces"},
		{Stderr, 1, "future tag"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines: %+v", len(lines), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.Stream != w.stream || l.Entries != w.entries || l.Message != w.message || l.Truncated || l.Incomplete {
			t.Errorf("line %d: %+v", i, l)
		}
	}
	if !lines[2].Time.Equal(ts("2024-01-02T03:04:05.2Z")) {
		t.Errorf("a joined line has its first entry's time, got %v", lines[2].Time)
	}
	if r.Pending() || len(r.Flush()) != 0 {
		t.Error("nothing should be pending")
	}
	if st := r.Stats(); st != (ReassemblerStats{Lines: 8, Partials: 2}) {
		t.Errorf("stats %+v", st)
	}
}

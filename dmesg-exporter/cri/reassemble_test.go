package cri

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func entry(stream Stream, partial bool, msg string, sec int) Entry {
	return Entry{Time: time.Date(2024, 1, 2, 3, 4, sec, 0, time.UTC), Stream: stream, Partial: partial, Message: msg}
}

func TestReassembler(t *testing.T) {
	type step struct {
		e    Entry
		want *Line // nil: no line expected
	}
	line := func(stream Stream, msg string, entries, sec int, truncated bool) *Line {
		return &Line{Time: time.Date(2024, 1, 2, 3, 4, sec, 0, time.UTC), Stream: stream, Message: msg, Entries: entries, Truncated: truncated}
	}
	tests := []struct {
		name  string
		max   int
		steps []step
		flush []Line
		stats ReassemblerStats
	}{
		{
			name: "full lines pass through",
			steps: []step{
				{entry(Stdout, false, "a", 1), line(Stdout, "a", 1, 1, false)},
				{entry(Stderr, false, "b", 2), line(Stderr, "b", 1, 2, false)},
			},
			stats: ReassemblerStats{Lines: 2},
		},
		{
			name: "partials joined per stream",
			steps: []step{
				{entry(Stdout, true, "out1 ", 1), nil},
				{entry(Stderr, true, "err1 ", 2), nil},
				{entry(Stdout, true, "out2 ", 3), nil},
				{entry(Stderr, false, "err2", 4), line(Stderr, "err1 err2", 2, 2, false)},
				{entry(Stdout, false, "out3", 5), line(Stdout, "out1 out2 out3", 3, 1, false)},
			},
			stats: ReassemblerStats{Lines: 2, Partials: 3},
		},
		{
			name: "empty final entry",
			steps: []step{
				{entry(Stdout, true, "abc", 1), nil},
				{entry(Stdout, false, "", 2), line(Stdout, "abc", 2, 1, false)},
			},
			stats: ReassemblerStats{Lines: 1, Partials: 1},
		},
		{
			name: "truncated at the cap, rest dropped until F",
			max:  20,
			steps: []step{
				{entry(Stdout, true, "0123456789", 1), nil},
				{entry(Stdout, true, "abcdefghij", 2), nil},
				{entry(Stdout, true, "KLMNOPQRST", 3), line(Stdout, "01234567"+TruncationMark, 3, 1, true)},
				{entry(Stdout, true, "dropped", 4), nil},
				{entry(Stdout, false, "dropped too", 5), nil},
				{entry(Stdout, false, "next", 6), line(Stdout, "next", 1, 6, false)},
			},
			stats: ReassemblerStats{Lines: 2, Partials: 4, Truncated: 1, DroppedBytes: 30 - 8 + 7 + 11},
		},
		{
			name: "a single F entry over the cap",
			max:  15,
			steps: []step{
				{entry(Stderr, false, strings.Repeat("x", 40), 1), line(Stderr, "xxx"+TruncationMark, 1, 1, true)},
				{entry(Stderr, false, "ok", 2), line(Stderr, "ok", 1, 2, false)},
			},
			stats: ReassemblerStats{Lines: 2, Truncated: 1, DroppedBytes: 37},
		},
		{
			name: "the F entry crosses the cap",
			max:  15,
			steps: []step{
				{entry(Stdout, true, "abc", 1), nil},
				{entry(Stdout, false, "defghijklmnop", 2), line(Stdout, "abc"+TruncationMark, 2, 1, true)},
				{entry(Stdout, false, "after", 3), line(Stdout, "after", 1, 3, false)},
			},
			stats: ReassemblerStats{Lines: 2, Partials: 1, Truncated: 1, DroppedBytes: 13},
		},
		{
			name: "exactly at the cap is not truncated",
			max:  15,
			steps: []step{
				{entry(Stdout, true, "0123456789", 1), nil},
				{entry(Stdout, false, "abcde", 2), line(Stdout, "0123456789abcde", 2, 1, false)},
			},
			stats: ReassemblerStats{Lines: 1, Partials: 1},
		},
		{
			name: "unfinished lines flushed",
			steps: []step{
				{entry(Stdout, true, "half of stdout", 1), nil},
				{entry(Stderr, true, "half ", 2), nil},
				{entry(Stderr, true, "of stderr", 3), nil},
			},
			flush: []Line{
				{Time: time.Date(2024, 1, 2, 3, 4, 1, 0, time.UTC), Stream: Stdout, Message: "half of stdout", Entries: 1, Incomplete: true},
				{Time: time.Date(2024, 1, 2, 3, 4, 2, 0, time.UTC), Stream: Stderr, Message: "half of stderr", Entries: 2, Incomplete: true},
			},
			stats: ReassemblerStats{Lines: 2, Partials: 3},
		},
		{
			name: "a truncated line is not flushed again",
			max:  14,
			steps: []step{
				{entry(Stdout, true, strings.Repeat("y", 20), 1), line(Stdout, "yy"+TruncationMark, 1, 1, true)},
			},
			stats: ReassemblerStats{Lines: 1, Partials: 1, Truncated: 1, DroppedBytes: 18},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReassembler(tc.max)
			for i, s := range tc.steps {
				got, ok := r.Add(s.e)
				if ok != (s.want != nil) {
					t.Fatalf("step %d: got %+v, %v; want %+v", i, got, ok, s.want)
				}
				if ok && (got != *s.want) {
					t.Errorf("step %d:\n got  %+v\n want %+v", i, got, *s.want)
				}
				if ok && len(got.Message) > r.MaxSize() {
					t.Errorf("step %d: %d bytes over the cap %d", i, len(got.Message), r.MaxSize())
				}
			}
			flushed := r.Flush()
			if len(flushed) != len(tc.flush) {
				t.Fatalf("flush: %+v, want %+v", flushed, tc.flush)
			}
			for i := range flushed {
				if flushed[i] != tc.flush[i] {
					t.Errorf("flush %d: %+v, want %+v", i, flushed[i], tc.flush[i])
				}
			}
			if r.Pending() {
				t.Error("pending after Flush")
			}
			if st := r.Stats(); st != tc.stats {
				t.Errorf("stats %+v, want %+v", st, tc.stats)
			}
		})
	}
}

func TestReassemblerUTF8Cut(t *testing.T) {
	// "é" is 2 bytes, "€" 3: a cut must not split them.
	for _, msg := range []string{strings.Repeat("é", 20), strings.Repeat("€", 20), "a" + strings.Repeat("€", 20), "ab" + strings.Repeat("€", 20)} {
		for max := 13; max < 30; max++ {
			r := NewReassembler(max)
			l, ok := r.Add(entry(Stdout, false, msg, 1))
			if !ok || !l.Truncated || len(l.Message) > max || !utf8.ValidString(l.Message) || !strings.HasSuffix(l.Message, TruncationMark) {
				t.Errorf("max %d, %q: %+v", max, msg, l)
			}
			if kept := len(l.Message) - len(TruncationMark); kept < max-len(TruncationMark)-3 {
				t.Errorf("max %d: kept only %d bytes", max, kept)
			}
		}
	}
}

func TestNewReassemblerLimits(t *testing.T) {
	if NewReassembler(0).MaxSize() != DefaultMaxLineSize || NewReassembler(-1).MaxSize() != DefaultMaxLineSize {
		t.Error("default cap")
	}
	if got := NewReassembler(1).MaxSize(); got != len(TruncationMark)+1 {
		t.Errorf("tiny cap raised to %d", got)
	}
}

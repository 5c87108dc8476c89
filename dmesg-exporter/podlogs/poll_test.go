package podlogs

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

func TestReading(t *testing.T) {
	long := strings.Repeat("x", 3000)
	tests := []struct {
		name      string
		max       int
		steps     []step
		want      []want
		malformed uint64
		truncated uint64
	}{
		{
			name:  "whole lines",
			steps: []step{{stream: "stdout", tag: "F", msg: "a"}, {stream: "stderr", tag: "F", msg: "b"}, {stream: "stdout", tag: "F", msg: "c"}},
			want:  []want{{"a", cri.Stdout, 0, false, false}, {"b", cri.Stderr, 1, false, false}, {"c", cri.Stdout, 2, false, false}},
		},
		{
			name:  "line split across writes",
			steps: []step{{stream: "stdout", tag: "F", msg: "hello world", split: 40}, {stream: "stdout", tag: "F", msg: "next", split: 3}},
			want:  []want{{"hello world", cri.Stdout, 0, false, false}, {"next", cri.Stdout, 1, false, false}},
		},
		{
			name: "partial run across reads",
			steps: []step{
				{stream: "stdout", tag: "P", msg: "abc", settle: true},
				{stream: "stdout", tag: "P", msg: "def", settle: true},
				{stream: "stdout", tag: "F", msg: "ghi"},
				{stream: "stdout", tag: "F", msg: "after"},
			},
			want: []want{{"abcdefghi", cri.Stdout, 2, false, false}, {"after", cri.Stdout, 3, false, false}},
		},
		{
			name: "streams joined independently; open run pins the offset",
			steps: []step{
				{stream: "stdout", tag: "P", msg: "out1 ", settle: true},
				{stream: "stderr", tag: "F", msg: "err", settle: true},
				{stream: "stdout", tag: "F", msg: "out2"},
			},
			want: []want{{"err", cri.Stderr, -1, false, false}, {"out1 out2", cri.Stdout, 2, false, false}},
		},
		{
			name: "pinned at the first open run, not the file start",
			steps: []step{
				{stream: "stdout", tag: "F", msg: "a"},
				{stream: "stderr", tag: "P", msg: "e1 "},
				{stream: "stdout", tag: "F", msg: "b"},
				{stream: "stderr", tag: "F", msg: "e2"},
			},
			want: []want{{"a", cri.Stdout, 0, false, false}, {"b", cri.Stdout, 0, false, false}, {"e1 e2", cri.Stderr, 3, false, false}},
		},
		{
			name:  "empty message and extra tags",
			steps: []step{{stream: "stdout", tag: "F", msg: ""}, {stream: "stdout", tag: "F:x", msg: "tagged"}},
			want:  []want{{"", cri.Stdout, 0, false, false}, {"tagged", cri.Stdout, 1, false, false}},
		},
		{
			name: "malformed lines skipped",
			steps: []step{
				{raw: "garbage\n"},
				{stream: "stdout", tag: "F", msg: "ok"},
				{raw: "2024-01-02T03:04:05Z stdbad F x\n"},
				{raw: "\n"},
				{stream: "stdout", tag: "F", msg: "ok2"},
			},
			want:      []want{{"ok", cri.Stdout, 1, false, false}, {"ok2", cri.Stdout, 4, false, false}},
			malformed: 3,
		},
		{
			name: "run cut at the size cap is delivered with its F line",
			max:  20,
			steps: []step{
				{stream: "stdout", tag: "P", msg: "0123456789"},
				{stream: "stdout", tag: "P", msg: "abcdefghij", settle: true},
				{stream: "stdout", tag: "P", msg: "KLMNOP", settle: true},
				{stream: "stdout", tag: "F", msg: "end"},
				{stream: "stdout", tag: "F", msg: "short"},
			},
			want:      []want{{"01234567" + cri.TruncationMark, cri.Stdout, 3, true, false}, {"short", cri.Stdout, 4, false, false}},
			truncated: 1,
		},
		{
			name: "overlong raw line is cut",
			max:  20,
			steps: []step{
				{stream: "stdout", tag: "F", msg: long},
				{stream: "stdout", tag: "F", msg: "next"},
			},
			want:      []want{{"xxxxxxxx" + cri.TruncationMark, cri.Stdout, 0, true, false}, {"next", cri.Stdout, 1, false, false}},
			truncated: 1,
		},
		{
			name: "overlong raw line across reads",
			max:  20,
			steps: []step{
				{stream: "stderr", tag: "F", msg: long, split: 1500},
				{stream: "stdout", tag: "F", msg: "next"},
			},
			want:      []want{{"xxxxxxxx" + cri.TruncationMark, cri.Stderr, 0, true, false}, {"next", cri.Stdout, 1, false, false}},
			truncated: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
			cfg := testConfig(root)
			cfg.MaxLineSize = tc.max
			h := startTailer(t, cfg)
			h.settle()
			ends := make([]int64, len(tc.steps))
			for i, s := range tc.steps {
				text := s.raw
				if text == "" {
					text = l.cri(s.stream, s.tag, s.msg)
				}
				if s.split > 0 {
					l.raw(text[:s.split])
					h.settle()
					text = text[s.split:]
				}
				ends[i] = l.raw(text)
				if s.settle {
					h.settle()
				}
			}
			wantMsgs := make([]string, len(tc.want))
			for i, w := range tc.want {
				wantMsgs[i] = w.msg
			}
			got := h.exactly(wantMsgs...)
			ino := inodeOfPath(t, l.path)
			for i, w := range tc.want {
				e := got[i]
				off := int64(0)
				if w.off >= 0 {
					off = ends[w.off]
				}
				if e.Stream != w.stream || e.Pos.Offset != off || e.Truncated != w.truncated || e.Incomplete != w.incomplete ||
					e.Pos.Inode != ino || e.Path != l.path {
					t.Errorf("entry %d = %+v\nwant stream %s offset %d truncated %v incomplete %v", i, e, w.stream, off, w.truncated, w.incomplete)
				}
			}
			st := h.tl.Stats()
			if st.Malformed != tc.malformed || st.Truncated != tc.truncated || st.Lines != uint64(len(tc.want)) || st.Bytes != uint64(l.off) {
				t.Errorf("stats = %+v, want malformed %d truncated %d lines %d bytes %d", st, tc.malformed, tc.truncated, len(tc.want), l.off)
			}
		})
	}
}

func TestRotationByRename(t *testing.T) {
	tests := []struct {
		name string
		// rotate writes around a rotation and returns the expected
		// messages of the old and of the new file after "a0".."a2".
		rotate func(t *testing.T, l *logFile, h *harness) (old, cur []string)
	}{
		{
			name: "lines written just before the rename",
			rotate: func(t *testing.T, l *logFile, h *harness) ([]string, []string) {
				l.full("b0", "b1", "b2")
				l.rotate("20240102-030405")
				l.reopen()
				l.full("c0", "c1")
				return []string{"b0", "b1", "b2"}, []string{"c0", "c1"}
			},
		},
		{
			name: "runtime writes to the old file until it reopens",
			rotate: func(t *testing.T, l *logFile, h *harness) ([]string, []string) {
				l.rotate("20240102-030405")
				l.full("b0")
				h.settle()
				l.full("b1")
				l.reopen()
				l.full("c0")
				return []string{"b0", "b1"}, []string{"c0"}
			},
		},
		{
			name: "rotated file compressed and removed before it was read",
			rotate: func(t *testing.T, l *logFile, h *harness) ([]string, []string) {
				l.full("b0", "b1")
				rotated := l.rotate("20240102-030405")
				if err := os.Remove(rotated); err != nil {
					t.Fatal(err)
				}
				l.reopen()
				l.full("c0")
				return []string{"b0", "b1"}, []string{"c0"}
			},
		},
		{
			name: "partial run open at the rotation",
			rotate: func(t *testing.T, l *logFile, h *harness) ([]string, []string) {
				l.full("b0")
				l.line("stdout", "P", "head")
				l.rotate("20240102-030405")
				l.reopen()
				l.line("stdout", "F", "c0")
				return []string{"b0", "head"}, []string{"c0"}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
			h := startTailer(t, testConfig(root))
			l.full("a0", "a1", "a2")
			h.waitN(3)
			oldIno := inodeOfPath(t, l.path)

			old, cur := tc.rotate(t, l, h)
			newIno := inodeOfPath(t, l.path)
			want := append(append([]string{"a0", "a1", "a2"}, old...), cur...)
			got := h.exactly(want...)
			var curEnd int64
			for i, e := range got {
				inOld := i < 3+len(old)
				if e.Path != l.path {
					t.Errorf("entry %d path %q", i, e.Path)
				}
				if inOld && e.Pos.Inode != oldIno || !inOld && e.Pos.Inode != newIno {
					t.Errorf("entry %d (%q) inode %d, old %d new %d", i, e.Message, e.Pos.Inode, oldIno, newIno)
				}
				if !inOld {
					if e.Pos.Offset <= curEnd {
						t.Errorf("entry %d offset %d not after %d", i, e.Pos.Offset, curEnd)
					}
					curEnd = e.Pos.Offset
				}
				if wantInc := e.Message == "head"; e.Incomplete != wantInc {
					t.Errorf("entry %d (%q) incomplete = %v", i, e.Message, e.Incomplete)
				}
			}
			if curEnd != l.off {
				t.Errorf("last offset %d, new file size %d", curEnd, l.off)
			}
			// The old file is closed once drained.
			waitFor(t, "old file closed", func() bool { return h.tl.Stats().FilesOpen == 1 })
			if st := h.tl.Stats(); st.Rotations != 1 || st.Files != 1 {
				t.Errorf("stats = %+v", st)
			}
			// And the new one is tailed as usual.
			l.full("d0")
			h.exactly(append(want, "d0")...)
		})
	}
}

func TestCopyTruncate(t *testing.T) {
	tests := []struct {
		name  string
		write func(l *logFile)
		want  []Entry // Message, Offset (relative to the new content), Incomplete
	}{
		{
			name:  "whole lines",
			write: func(l *logFile) { l.full("a0", "a1", "a2", "a3") },
		},
		{
			name: "partial run open at the truncation",
			write: func(l *logFile) {
				l.full("a0")
				l.line("stdout", "P", "head")
			},
			want: []Entry{{Message: "head", Incomplete: true}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
			h := startTailer(t, testConfig(root))
			tc.write(l)
			h.waitN(1)
			h.settle()
			before := len(h.entries())
			ino := inodeOfPath(t, l.path)

			if err := os.Truncate(l.path, 0); err != nil {
				t.Fatal(err)
			}
			l.off = 0
			waitFor(t, "truncation noticed", func() bool { return h.tl.Stats().Truncations == 1 })
			e0 := l.full("b0")
			e1 := l.full("b1")
			got := h.waitN(before + len(tc.want) + 2)
			h.settle()
			got = h.entries()[before:]
			want := append(slices.Clone(tc.want), Entry{Message: "b0", Pos: state.PodPos{Offset: e0}}, Entry{Message: "b1", Pos: state.PodPos{Offset: e1}})
			if len(got) != len(want) {
				t.Fatalf("after truncation got %q", messages(got))
			}
			for i, w := range want {
				g := got[i]
				if g.Message != w.Message || g.Pos.Offset != w.Pos.Offset || g.Incomplete != w.Incomplete || g.Pos.Inode != ino {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
			}
			if st := h.tl.Stats(); st.Rotations != 0 || st.FilesOpen != 1 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

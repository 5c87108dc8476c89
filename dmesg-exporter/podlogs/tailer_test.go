package podlogs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

func TestNewRejectsBadFilters(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"include", Config{IncludeNamespaces: []string{"ok", "("}}, "include namespace"},
		{"exclude", Config{ExcludeNamespaces: []string{"[a-"}}, "exclude namespace"},
		{"pod", Config{PodName: "*x"}, "pod name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestDiscoveryFilters(t *testing.T) {
	root := t.TempDir()
	type file struct{ ns, pod, container, name string }
	files := []file{
		{"train", "llama-train-0", "main", "0.log"},
		{"train", "llama-train-0", "main", "1.log"}, // container restarted
		{"train", "llama-train-0", "sidecar", "0.log"},
		{"train", "web-1", "main", "0.log"},
		{"kube-system", "coredns-1", "coredns", "0.log"},
		{"default", "llama-train-1", "main", "0.log"},
	}
	for _, f := range files {
		l := newLogFile(t, containerDir(root, f.ns, f.pod, "uid-1", f.container), f.name)
		l.full(f.ns + "/" + f.pod + "/" + f.container + "/" + f.name)
	}
	// Never tailed: rotated and compressed files, things that are not pod
	// log files.
	main := containerDir(root, "train", "llama-train-0", "uid-1", "main")
	for name, content := range map[string]string{
		filepath.Join(main, "0.log.20240101-000000"):                "2024-01-01T00:00:00Z stdout F rotated\n",
		filepath.Join(main, "0.log.20231231-000000.gz"):             "not gzip, not read\n",
		filepath.Join(main, "notes.txt"):                            "2024-01-01T00:00:00Z stdout F txt\n",
		filepath.Join(root, "no-underscores", "c", "0.log"):         "2024-01-01T00:00:00Z stdout F junk1\n",
		filepath.Join(root, "ns_only-two", "c", "0.log"):            "2024-01-01T00:00:00Z stdout F junk2\n",
		filepath.Join(root, "BAD_pod_uid-1", "c", "0.log"):          "2024-01-01T00:00:00Z stdout F junk3\n",
		filepath.Join(root, "top.log"):                              "2024-01-01T00:00:00Z stdout F junk4\n",
		filepath.Join(root, "ns_pod_uid-2", "c", "deeper", "0.log"): "2024-01-01T00:00:00Z stdout F junk5\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	all := []string{
		"default/llama-train-1/main/0.log",
		"kube-system/coredns-1/coredns/0.log",
		"train/llama-train-0/main/0.log",
		"train/llama-train-0/main/1.log",
		"train/llama-train-0/sidecar/0.log",
		"train/web-1/main/0.log",
	}
	tests := []struct {
		name string
		cfg  func(*Config)
		want []string
	}{
		{"no filters", func(*Config) {}, all},
		{"include namespace", func(c *Config) { c.IncludeNamespaces = []string{"train"} }, []string{
			"train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log", "train/web-1/main/0.log",
		}},
		{"include is anchored", func(c *Config) { c.IncludeNamespaces = []string{"trai"} }, nil},
		{"exclude namespace", func(c *Config) { c.ExcludeNamespaces = []string{"kube-.*"} }, []string{
			"default/llama-train-1/main/0.log", "train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log",
			"train/llama-train-0/sidecar/0.log", "train/web-1/main/0.log",
		}},
		{"exclude wins over include", func(c *Config) {
			c.IncludeNamespaces = []string{"train", "default"}
			c.ExcludeNamespaces = []string{"default"}
		}, []string{
			"train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log", "train/web-1/main/0.log",
		}},
		{"pod name", func(c *Config) { c.PodName = "llama-train-.*" }, []string{
			"default/llama-train-1/main/0.log", "train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log",
		}},
		{"namespace and pod name", func(c *Config) {
			c.IncludeNamespaces = []string{"train"}
			c.PodName = "llama-.*"
		}, []string{"train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(root)
			tc.cfg(&cfg)
			h := startTailer(t, cfg)
			if len(tc.want) > 0 {
				h.waitN(len(tc.want))
			}
			h.settle()
			got := messages(h.entries())
			sort.Strings(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
			if st := h.tl.Stats(); st.Files != int64(len(tc.want)) || st.FilesOpen != int64(len(tc.want)) {
				t.Fatalf("stats = %+v, want %d files", st, len(tc.want))
			}
		})
	}
}

func TestDiscoveryNewPodsAndMetadata(t *testing.T) {
	root := filepath.Join(t.TempDir(), "pods") // does not exist yet
	h := startTailer(t, testConfig(root))
	h.settle()

	a := newLogFile(t, containerDir(root, "train", "job-0", "0f6c1b3e-1111-2222-3333-444455556666", "worker"), "0.log")
	a.line("stderr", "F", "first")
	got := h.waitN(1)
	want := Entry{
		Path:      a.path,
		Pos:       state.PodPos{Inode: inodeOfPath(t, a.path), Offset: a.off},
		Time:      baseTime.Add(time.Millisecond),
		Stream:    cri.Stderr,
		Namespace: "train", Pod: "job-0", UID: "0f6c1b3e-1111-2222-3333-444455556666", Container: "worker",
		Message: "first",
	}
	if got[0] != want {
		t.Fatalf("entry:\n got %+v\nwant %+v", got[0], want)
	}

	// A container that appears later in the same pod, and a second pod.
	b := newLogFile(t, containerDir(root, "train", "job-0", "0f6c1b3e-1111-2222-3333-444455556666", "sidecar"), "0.log")
	b.full("b0", "b1")
	c := newLogFile(t, containerDir(root, "train", "job-1", "uid-2", "worker"), "0.log")
	c.full("c0")
	got = h.waitN(4)
	byPath := map[string][]string{}
	for _, e := range got {
		byPath[e.Path] = append(byPath[e.Path], e.Message)
	}
	if !slices.Equal(byPath[b.path], []string{"b0", "b1"}) || !slices.Equal(byPath[c.path], []string{"c0"}) {
		t.Fatalf("by path: %q", byPath)
	}
}

// step is one write to a log file in TestReading.
type step struct {
	stream, tag, msg string
	raw              string // written as is instead of a CRI line
	split            int    // write the first split bytes, let the tailer read them, then the rest
	settle           bool   // let the tailer read before the next step
}

// want is an expected entry; off is the index of the step whose end is the
// entry's offset, -1 for offset 0.
type want struct {
	msg        string
	stream     cri.Stream
	off        int
	truncated  bool
	incomplete bool
}

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

// TestResumeEveryCut stops after each entry in turn and checks that a
// restart at its position delivers exactly the entries after it.
func TestResumeEveryCut(t *testing.T) {
	root := t.TempDir()
	l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
	l.line("stdout", "F", "a")
	l.line("stdout", "P", "b1 ")
	l.line("stdout", "P", "b2 ")
	l.line("stdout", "F", "b3")
	l.line("stderr", "F", "c")
	l.raw("garbage\n")
	l.line("stderr", "P", "d1 ")
	l.line("stderr", "F", "d2")
	l.line("stdout", "F", "e")
	first := startTailer(t, testConfig(root))
	all := first.exactly("a", "b1 b2 b3", "c", "d1 d2", "e")
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	type tcase struct {
		name  string
		start map[string]state.PodPos
		skip  bool
		want  []string
	}
	tests := []tcase{
		{name: "no position", want: append(messages(all), "z")},
		{name: "no position, skip existing", skip: true, want: []string{"z"}},
	}
	for i, e := range all {
		tests = append(tests, tcase{
			name:  "after " + e.Message,
			start: positions(e),
			want:  append(messages(all[i+1:]), "z"),
		})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each run appends "z" again; start from the same content.
			c := copyTree(t, root)
			cl := &logFile{t: t, path: filepath.Join(containerDir(c, "ns", "pod", "uid", "c"), "0.log"), n: 100}
			cl.open()
			defer cl.f.Close()
			cfg := testConfig(c)
			cfg.SkipExisting = tc.skip
			cfg.Start = rebase(tc.start, root, c, t)
			h := startTailer(t, cfg)
			h.settle()
			cl.full("z")
			h.exactly(tc.want...)
		})
	}
}

// copyTree copies a pod log root; inodes change, so rebase positions too.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// rebase moves positions recorded under root to the copy at c, with the
// copy's inodes.
func rebase(pos map[string]state.PodPos, root, c string, t *testing.T) map[string]state.PodPos {
	out := map[string]state.PodPos{}
	for p, v := range pos {
		rel, _ := filepath.Rel(root, p)
		np := filepath.Join(c, rel)
		out[np] = state.PodPos{Inode: inodeOfPath(t, np), Offset: v.Offset}
	}
	return out
}

func TestResumeStoredPositions(t *testing.T) {
	tests := []struct {
		name string
		// whileStopped changes the files between the runs; the restart
		// resumes after "a1".
		whileStopped func(t *testing.T, l *logFile)
		want         []string
		wantOldInode int // entries read from the old file
		unrecovered  uint64
		truncations  uint64
		badOffset    int64 // replaces the stored offset
	}{
		{
			name:         "same file, more lines",
			whileStopped: func(t *testing.T, l *logFile) { l.full("a3") },
			want:         []string{"a2", "a3", "z"},
			wantOldInode: 3,
		},
		{
			name: "rotated while stopped, rotated file still there",
			whileStopped: func(t *testing.T, l *logFile) {
				l.full("a3")
				l.rotate("20240102-030405")
				l.reopen()
				l.full("c0")
			},
			want:         []string{"a2", "a3", "c0", "z"},
			wantOldInode: 2,
		},
		{
			name: "rotated while stopped, rotated file compressed",
			whileStopped: func(t *testing.T, l *logFile) {
				l.full("a3")
				r := l.rotate("20240102-030405")
				if err := os.Rename(r, r+".gz"); err != nil {
					t.Fatal(err)
				}
				l.reopen()
				l.full("c0")
			},
			want:        []string{"c0", "z"},
			unrecovered: 1,
		},
		{
			name: "rotated while stopped, rotated file deleted",
			whileStopped: func(t *testing.T, l *logFile) {
				if err := os.Remove(l.rotate("20240102-030405")); err != nil {
					t.Fatal(err)
				}
				l.reopen()
				l.full("c0")
			},
			want:        []string{"c0", "z"},
			unrecovered: 1,
		},
		{
			name:         "stored offset not at a line start (inode reused)",
			whileStopped: func(t *testing.T, l *logFile) {},
			badOffset:    3,
			want:         []string{"a0", "a1", "a2", "z"},
			wantOldInode: 4,
			unrecovered:  1,
		},
		{
			name:         "stored offset beyond the end",
			whileStopped: func(t *testing.T, l *logFile) {},
			badOffset:    1 << 20,
			want:         []string{"a0", "a1", "a2", "z"},
			wantOldInode: 4,
			truncations:  1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
			l.full("a0", "a1", "a2")
			oldIno := inodeOfPath(t, l.path)
			first := startTailer(t, testConfig(root))
			got := first.exactly("a0", "a1", "a2")
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}
			start := positions(got[1])
			if tc.badOffset != 0 {
				start[l.path] = state.PodPos{Inode: oldIno, Offset: tc.badOffset}
			}
			tc.whileStopped(t, l)

			cfg := testConfig(root)
			cfg.Start = start
			h := startTailer(t, cfg)
			h.settle()
			l.full("z")
			res := h.exactly(tc.want...)
			for i, e := range res {
				if e.Path != l.path {
					t.Errorf("entry %d path %q", i, e.Path)
				}
				if old := i < tc.wantOldInode; old != (e.Pos.Inode == oldIno) {
					t.Errorf("entry %d (%q) inode %d, old inode %d", i, e.Message, e.Pos.Inode, oldIno)
				}
			}
			if st := h.tl.Stats(); st.Unrecovered != tc.unrecovered || st.Truncations != tc.truncations {
				t.Errorf("stats = %+v", st)
			}
			waitFor(t, "rotated file closed", func() bool { return h.tl.Stats().FilesOpen == 1 })
		})
	}
}

// TestResumeInterleavedIsAtLeastOnce: with a partial stdout run open across
// a stderr line, no offset can say "stderr done, stdout not": a restart
// repeats the stderr line rather than lose the head of the stdout line.
func TestResumeInterleavedIsAtLeastOnce(t *testing.T) {
	root := t.TempDir()
	l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
	l.line("stdout", "F", "before")
	l.line("stdout", "P", "o1 ")
	l.line("stderr", "F", "x")
	l.line("stdout", "F", "o2")
	l.line("stdout", "F", "after")
	first := startTailer(t, testConfig(root))
	all := first.exactly("before", "x", "o1 o2", "after")
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	if all[1].Pos.Offset != all[0].Pos.Offset {
		t.Fatalf("x offset %d, want it pinned at %d", all[1].Pos.Offset, all[0].Pos.Offset)
	}
	for i, want := range [][]string{
		{"x", "o1 o2", "after"},
		{"x", "o1 o2", "after"}, // x again: at least once
		{"after"},
		{},
	} {
		cfg := testConfig(root)
		cfg.Start = positions(all[i])
		h := startTailer(t, cfg)
		h.exactly(want...)
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPodDirectoryDeleted(t *testing.T) {
	tests := []struct {
		name   string
		remove func(t *testing.T, l *logFile)
	}{
		{"pod directory", func(t *testing.T, l *logFile) {
			if err := os.RemoveAll(filepath.Dir(filepath.Dir(l.path))); err != nil {
				t.Fatal(err)
			}
		}},
		{"container directory", func(t *testing.T, l *logFile) {
			if err := os.RemoveAll(filepath.Dir(l.path)); err != nil {
				t.Fatal(err)
			}
		}},
		{"file only, given up after GoneAfter", func(t *testing.T, l *logFile) {
			if err := os.Remove(l.path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			a := newLogFile(t, containerDir(root, "ns", "gone", "uid-a", "c"), "0.log")
			b := newLogFile(t, containerDir(root, "ns", "stays", "uid-b", "c"), "0.log")
			h := startTailer(t, testConfig(root))
			a.full("a0")
			b.full("b0")
			h.waitN(2)
			waitFor(t, "both tailed", func() bool { return h.tl.Tailing(a.path) && h.tl.Tailing(b.path) })

			// Written right before the removal: still delivered from the
			// open descriptor, however the reads fall.
			a.full("a1", "a2")
			tc.remove(t, a)
			waitFor(t, "removed file given up", func() bool { return !h.tl.Tailing(a.path) })
			b.full("b1")
			h.waitN(5)
			h.settle()
			byPath := map[string][]string{}
			for _, e := range h.entries() {
				byPath[e.Path] = append(byPath[e.Path], e.Message)
			}
			if !slices.Equal(byPath[a.path], []string{"a0", "a1", "a2"}) || !slices.Equal(byPath[b.path], []string{"b0", "b1"}) {
				t.Fatalf("by path: %q", byPath)
			}
			if st := h.tl.Stats(); st.Files != 1 || st.FilesOpen != 1 {
				t.Fatalf("stats = %+v", st)
			}
			pods := map[string]state.PodPos{a.path: {Inode: 1}, b.path: {Inode: 2}, "/elsewhere/x_y_z/c/0.log": {}}
			if n := h.tl.Prune(pods); n != 2 || len(pods) != 1 {
				t.Fatalf("Prune removed %d, left %v", n, pods)
			}
			if _, ok := pods[b.path]; !ok {
				t.Fatalf("Prune removed the live file: %v", pods)
			}
		})
	}
}

func TestPruneKeepsEverythingBeforeTheFirstScan(t *testing.T) {
	tl, err := New(testConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]state.PodPos{"/var/log/pods/a_b_c/d/0.log": {Inode: 1, Offset: 2}}
	if n := tl.Prune(pods); n != 0 || len(pods) != 1 {
		t.Fatalf("Prune before the first scan removed %d", n)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStopping(t *testing.T) {
	tests := []struct {
		name string
		// run starts the tailer and stops it; it returns Run's result.
		run  func(t *testing.T, tl *Tailer, l *logFile) error
		want error
	}{
		{
			name: "cancel while blocked on a full channel",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				ctx, cancel := context.WithCancel(context.Background())
				out := make(chan Entry) // nobody reads
				done := make(chan error, 1)
				go func() { done <- tl.Run(ctx, out) }()
				l.full(msgs("m", 100)...)
				waitFor(t, "read", func() bool { return tl.Stats().Bytes > 0 })
				cancel()
				return waitErr(t, done)
			},
		},
		{
			name: "cancel while idle",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				ctx, cancel := context.WithCancel(context.Background())
				out := make(chan Entry, 10)
				done := make(chan error, 1)
				go func() { done <- tl.Run(ctx, out) }()
				l.full("m0")
				select {
				case <-out:
				case <-time.After(waitTimeout):
					t.Fatal("no entry")
				}
				cancel()
				return waitErr(t, done)
			},
		},
		{
			name: "Close from another goroutine",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				done := make(chan error, 1)
				go func() { done <- tl.Run(context.Background(), make(chan Entry)) }()
				l.full("m0")
				waitFor(t, "open", func() bool { return tl.Stats().FilesOpen == 1 })
				if err := tl.Close(); err != nil {
					t.Fatal(err)
				}
				if tl.Stats().FilesOpen != 0 {
					t.Fatal("Close returned with files open")
				}
				return waitErr(t, done)
			},
		},
		{
			name: "error from the callback",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				l.full("m0")
				return tl.RunFunc(context.Background(), func(context.Context, Entry) error { return errStop })
			},
			want: errStop,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
			tl, err := New(testConfig(root))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.run(t, tl, l); !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if st := tl.Stats(); st.FilesOpen != 0 || st.Files != 0 {
				t.Fatalf("after stop: %+v", st)
			}
			if err := tl.Run(context.Background(), make(chan Entry)); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Run = %v", err)
			}
			if err := tl.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return")
		return nil
	}
}

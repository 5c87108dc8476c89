package podlogs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

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

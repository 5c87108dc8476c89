package podlogs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

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

package podlogs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"

	"github.com/faultline-dev/faultline/test/eventually"
)

const waitTimeout = 10 * time.Second

var baseTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// logFile writes a container log file the way a runtime does: appending CRI
// lines to an open descriptor.
type logFile struct {
	t    *testing.T
	path string
	f    *os.File
	off  int64
	n    int
}

func containerDir(root, ns, pod, uid, container string) string {
	return filepath.Join(root, ns+"_"+pod+"_"+uid, container)
}

func newLogFile(t *testing.T, dir, name string) *logFile {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &logFile{t: t, path: filepath.Join(dir, name)}
	l.open()
	t.Cleanup(func() {
		if l.f != nil {
			l.f.Close()
		}
	})
	return l
}

func (l *logFile) open() {
	l.t.Helper()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		l.t.Fatal(err)
	}
	l.f, l.off = f, 0
}

// raw appends s as is and returns the offset after it.
func (l *logFile) raw(s string) int64 {
	l.t.Helper()
	if _, err := l.f.WriteString(s); err != nil {
		l.t.Fatal(err)
	}
	l.off += int64(len(s))
	return l.off
}

// cri formats one CRI line with a fresh timestamp.
func (l *logFile) cri(stream, tag, msg string) string {
	l.n++
	ts := baseTime.Add(time.Duration(l.n) * time.Millisecond)
	// A fixed-width timestamp keeps line lengths predictable.
	return fmt.Sprintf("%s %s %s %s\n", ts.Format("2006-01-02T15:04:05.000000000Z"), stream, tag, msg)
}

// line appends one CRI line and returns the offset after it.
func (l *logFile) line(stream, tag, msg string) int64 {
	l.t.Helper()
	return l.raw(l.cri(stream, tag, msg))
}

// full appends whole stdout lines.
func (l *logFile) full(msgs ...string) int64 {
	l.t.Helper()
	for _, m := range msgs {
		l.line("stdout", "F", m)
	}
	return l.off
}

// rotate renames the file as the kubelet does; the descriptor stays open
// on the renamed file until reopen.
func (l *logFile) rotate(suffix string) string {
	l.t.Helper()
	to := l.path + "." + suffix
	if err := os.Rename(l.path, to); err != nil {
		l.t.Fatal(err)
	}
	return to
}

// reopen creates the file at the path again and then closes the old
// descriptor, as a runtime does (the old inode cannot be reused by the new
// file).
func (l *logFile) reopen() {
	l.t.Helper()
	old := l.f
	l.open()
	old.Close()
}

func inodeOfPath(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return inodeOf(fi)
}

// harness runs a Tailer and collects what it delivers.
type harness struct {
	t      *testing.T
	tl     *Tailer
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	got    []Entry
}

func testConfig(root string) Config {
	return Config{
		Root:           root,
		PollInterval:   2 * time.Millisecond,
		RescanInterval: 2 * time.Millisecond,
		GoneAfter:      500 * time.Millisecond,
	}
}

func startTailer(t *testing.T, cfg Config) *harness {
	t.Helper()
	tl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, tl: tl, cancel: cancel, done: make(chan error, 1)}
	go func() {
		h.done <- tl.RunFunc(ctx, func(ctx context.Context, e Entry) error {
			h.mu.Lock()
			h.got = append(h.got, e)
			h.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop cancels the tailer and returns what Run returned.
func (h *harness) stop() error {
	h.t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err // later calls see it too
		return err
	case <-time.After(waitTimeout):
		h.t.Fatal("tailer did not stop")
		return nil
	}
}

func (h *harness) entries() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// waitFor polls cond until it holds, for at most waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, waitTimeout, what, cond)
}

// waitN waits until at least n entries arrived and returns them all.
func (h *harness) waitN(n int) []Entry {
	h.t.Helper()
	waitFor(h.t, fmt.Sprintf("%d entries", n), func() bool { return len(h.entries()) >= n })
	return h.entries()
}

// settle waits until the tailer completed a few full rounds after the call:
// whatever was written before is then read and delivered.
func (h *harness) settle() {
	h.t.Helper()
	r := h.tl.rounds.Load()
	waitFor(h.t, "tailer rounds", func() bool { return h.tl.rounds.Load() >= r+3 })
}

// exactly settles and checks that exactly the messages want arrived, in order.
func (h *harness) exactly(want ...string) []Entry {
	h.t.Helper()
	if len(want) > 0 {
		h.waitN(len(want))
	}
	h.settle()
	got := h.entries()
	if m := messages(got); !slices.Equal(m, want) {
		h.t.Fatalf("messages:\n got %q\nwant %q", m, want)
	}
	return got
}

func messages(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Message
	}
	return out
}

func msgs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// positions turns an entry into a state map as the exporter persists it.
func positions(e Entry) map[string]state.PodPos {
	return map[string]state.PodPos{e.Path: e.Pos}
}

func isStream(s cri.Stream) func(Entry) bool {
	return func(e Entry) bool { return e.Stream == s }
}

var errStop = errors.New("stop")

func contains(s []string, sub string) bool {
	return slices.ContainsFunc(s, func(x string) bool { return strings.Contains(x, sub) })
}

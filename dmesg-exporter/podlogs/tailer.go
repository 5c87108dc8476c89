// Package podlogs tails the container log files the kubelet keeps under
// /var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log and turns their
// CRI-format lines into whole log lines, each with the position to persist
// once the line was shipped.
//
// # Discovery and filters
//
// A Tailer lists the root directory every Config.RescanInterval. Pod
// directories whose namespace or pod name the filters reject are never
// opened. Every file whose name ends in ".log" in a container directory is
// tailed; rotated files ("0.log.20240102-030405", "….gz") are not discovered
// as files of their own.
//
// # Positions
//
// Every Entry carries its path and a position (inode and offset): where to
// resume once that entry (and all before it) was acknowledged. Store
// it in state.File.Pods[Path] and pass that map back as Config.Start on the
// next run. For a file whose lines are whole ("F") or whose partial ("P")
// runs do not interleave across stdout and stderr, resuming at an entry's
// offset replays nothing and skips nothing: the offset of a joined line is
// the end of its final ("F") CRI line, and a partial run never moves the
// offset before its F line is read.
//
// When a partial run on one stream is still open while a line on the other
// stream completes (a long stdout line split by the runtime, with a stderr
// line written between its parts), no single offset can describe "that
// stderr line is done but the start of the stdout line is not". The offset
// then stays at the start of the open run, so a restart at that point
// delivers the stderr line again rather than losing the head of the stdout
// line: at least once, never a loss.
//
// A path's entries arrive in file order, all of a rotated file's before any
// of its successor's, so the last acknowledged entry of a path is its
// position. Incomplete lines delivered because the file was truncated carry
// offset 0: the truncated bytes are gone, what follows starts at 0.
//
// # Rotation and truncation
//
// The kubelet rotates a container log by renaming n.log to
// n.log.<timestamp> and asking the runtime to reopen n.log. A Tailer notices
// the new inode behind the path when the file it reads is at its end, keeps
// reading the old file through its open descriptor until it stays at its end
// for one more poll interval (lines the runtime wrote before it reopened are
// not lost), then reads the new file from offset 0. A file that shrinks below
// the read position (copytruncate) is read again from offset 0.
//
// On start, a stored position whose inode no longer matches the file at the
// path means the file was rotated while nothing read it. The current file is
// then read from offset 0; if an uncompressed rotated sibling n.log.<suffix>
// with the stored inode still exists, the rest of it is read first, from the
// stored offset (best effort: the kubelet compresses rotated files, after
// which their tail is lost and Stats.Unrecovered counts it). A stored offset
// that does not follow a newline in the file with the stored inode is not
// trusted either (the inode number was reused by a new file): that file is
// read from offset 0.
//
// Inode numbers come from stat(2); on systems without them (not Unix)
// rotation by rename goes unnoticed and stored positions are never trusted.
package podlogs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

// Defaults of Config fields.
const (
	DefaultPollInterval   = 250 * time.Millisecond
	DefaultRescanInterval = time.Second
	DefaultGoneAfter      = 5 * time.Second
)

const (
	// readChunk is the size of one read from a log file.
	readChunk = 64 << 10
	// readBudget bounds what one file may read in one round before the
	// other files get their turn.
	readBudget = 1 << 20
	// headerRoom is what a CRI line may hold besides its message
	// (timestamp, stream, tags) before it counts as overlong.
	headerRoom = 1 << 10
)

// ErrClosed is returned by Run on a Tailer that was closed or already ran.
var ErrClosed = errors.New("podlogs: tailer closed")

// Config configures a Tailer. The zero value tails every pod under
// /var/log/pods.
type Config struct {
	// Root is the directory holding the pod directories
	// (cri.DefaultPodLogRoot when empty).
	Root string
	// PollInterval is how often open files are checked for new data
	// (DefaultPollInterval when <= 0).
	PollInterval time.Duration
	// RescanInterval is how often Root is listed for new pods, containers
	// and files (DefaultRescanInterval when <= 0).
	RescanInterval time.Duration
	// GoneAfter is how long a file may be missing from its path, its
	// directory still there, before it is given up (DefaultGoneAfter when
	// <= 0). A file whose container or pod directory is gone is given up
	// as soon as it was read to its end.
	GoneAfter time.Duration

	// IncludeNamespaces, when not empty, limits tailing to pods whose
	// namespace matches one of these regular expressions.
	// ExcludeNamespaces drops pods whose namespace matches one of them; it
	// wins over IncludeNamespaces. PodName, when not empty, limits tailing
	// to pods whose name matches it. Every expression must match the whole
	// name (it is anchored, as in Prometheus relabelling): "train-.*", not
	// "train-".
	IncludeNamespaces []string
	ExcludeNamespaces []string
	PodName           string
	// Allow, when set, is asked about every pod the other filters accept (for
	// example a label selector answered from the API); a pod it refuses is asked
	// again at the next rescan, so a pod whose metadata arrives late is not lost.
	Allow func(namespace, pod, uid string) bool

	// Start holds the positions to resume from, by path, as persisted from
	// the Entry fields Path and Pos. Files without a position are
	// read from their beginning.
	Start map[string]state.PodPos
	// SkipExisting starts files that exist at the first scan and have no
	// position in Start at their end instead of their beginning (a first
	// deployment on a node with a long history). Files that appear later
	// are always read from their beginning.
	SkipExisting bool

	// MaxLineSize caps the message of an Entry, in bytes
	// (cri.DefaultMaxLineSize when <= 0). Longer lines are cut, end with
	// cri.TruncationMark, and are counted in Stats.Truncated.
	MaxLineSize int

	// Log receives warnings (unreadable files, lost tails). Nil discards.
	Log *slog.Logger
}

// Entry is one whole log line of a container.
type Entry struct {
	// Path is the tailed file, <root>/<ns>_<pod>_<uid>/<container>/<n>.log.
	// Lines read from a rotated file after its rotation carry the path it
	// was read under, not its new name: Path is the key of the position.
	Path string
	// Pos is the position to persist under Path once this entry is
	// acknowledged: the file it was read from (Pos.Inode) and where to resume
	// reading it, the byte after the entry's final CRI line (see the package
	// documentation for interleaved partial lines).
	Pos state.PodPos

	Time   time.Time
	Stream cri.Stream

	Namespace string
	Pod       string
	UID       string
	Container string

	Message string
	// Truncated is true when the line was longer than MaxLineSize and cut.
	Truncated bool
	// Incomplete is true for a partial line whose final part never came:
	// the file ended (rotated away, truncated, or deleted) in the middle
	// of it.
	Incomplete bool
}

// Stats are a Tailer's counters, for the caller's metrics.
type Stats struct {
	// Lines is the number of entries delivered.
	Lines uint64
	// Bytes is the number of bytes read from log files.
	Bytes uint64
	// Truncated counts entries cut at MaxLineSize.
	Truncated uint64
	// Malformed counts CRI lines that did not parse and were skipped.
	Malformed uint64
	// Rotations counts files replaced under their path (rename).
	Rotations uint64
	// Truncations counts files that shrank below the read position
	// (copytruncate) or below a stored position.
	Truncations uint64
	// Unrecovered counts stored positions whose file was rotated while
	// nothing read it and whose rotated file could not be found: the rest
	// of that file is lost.
	Unrecovered uint64
	// Errors counts failures to list, open, stat or read files.
	Errors uint64
	// FilesOpen is the number of open file descriptors; Files the number
	// of paths tailed.
	FilesOpen int64
	Files     int64
}

type counters struct {
	lines, bytes, truncated, malformed, rotations, truncations, unrecovered, errors atomic.Uint64
	filesOpen, files                                                                atomic.Int64
}

// Tailer tails the pod log files under a root directory. Create it with
// New, run it once with Run or RunFunc, stop it by cancelling the context or
// with Close.
type Tailer struct {
	cfg              Config
	include, exclude []*regexp.Regexp
	podName          *regexp.Regexp
	log              *slog.Logger
	physCap          int
	chunk            []byte
	emitFn           func(context.Context, Entry) error
	stats            counters
	rounds           atomic.Uint64 // polling rounds done, for tests

	// Owned by the Run goroutine.
	files      map[string]*tailFile
	podDirs    map[string]bool // pod directory name -> passes the filters
	openFailed map[string]bool
	rootWarned bool

	mu      sync.Mutex
	start   map[string]state.PodPos // positions not used yet
	tracked map[string]struct{}
	scanned bool
	state   int // idle, running, done
	cancel  context.CancelFunc
	done    chan struct{}
}

const (
	stateIdle = iota
	stateRunning
	stateDone
)

// New checks cfg and returns a Tailer.
func New(cfg Config) (*Tailer, error) {
	if cfg.Root == "" {
		cfg.Root = cri.DefaultPodLogRoot
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.RescanInterval <= 0 {
		cfg.RescanInterval = DefaultRescanInterval
	}
	if cfg.GoneAfter <= 0 {
		cfg.GoneAfter = DefaultGoneAfter
	}
	if cfg.MaxLineSize <= 0 {
		cfg.MaxLineSize = cri.DefaultMaxLineSize
	}
	t := &Tailer{
		cfg:        cfg,
		log:        cfg.Log,
		chunk:      make([]byte, readChunk),
		files:      map[string]*tailFile{},
		podDirs:    map[string]bool{},
		openFailed: map[string]bool{},
		start:      make(map[string]state.PodPos, len(cfg.Start)),
		tracked:    map[string]struct{}{},
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	// The reassembler raises tiny caps; use its figure for the raw line cap.
	t.physCap = cri.NewReassembler(cfg.MaxLineSize).MaxSize() + headerRoom
	for p, pos := range cfg.Start {
		t.start[filepath.Clean(p)] = pos
	}
	var err error
	if t.include, err = compileAll("include namespace", cfg.IncludeNamespaces); err != nil {
		return nil, err
	}
	if t.exclude, err = compileAll("exclude namespace", cfg.ExcludeNamespaces); err != nil {
		return nil, err
	}
	if cfg.PodName != "" {
		if t.podName, err = compile("pod name", cfg.PodName); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func compile(what, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("podlogs: %s filter %q: %w", what, expr, err)
	}
	return re, nil
}

func compileAll(what string, exprs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, e := range exprs {
		re, err := compile(what, e)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// Stats returns a snapshot of the counters. It is safe to call at any time.
func (t *Tailer) Stats() Stats {
	c := &t.stats
	return Stats{
		Lines: c.lines.Load(), Bytes: c.bytes.Load(), Truncated: c.truncated.Load(),
		Malformed: c.malformed.Load(), Rotations: c.rotations.Load(), Truncations: c.truncations.Load(),
		Unrecovered: c.unrecovered.Load(), Errors: c.errors.Load(),
		FilesOpen: c.filesOpen.Load(), Files: c.files.Load(),
	}
}

// Run tails until ctx is done or Close is called, sending every entry to
// out. The send blocks while out is full: a slow consumer slows the reading
// down, nothing is buffered beyond a line per file. Run returns nil when
// stopped, and releases every file it opened before it returns. A Tailer
// runs once.
func (t *Tailer) Run(ctx context.Context, out chan<- Entry) error {
	return t.RunFunc(ctx, func(ctx context.Context, e Entry) error {
		select {
		case out <- e:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// RunFunc is Run with a callback instead of a channel. fn runs on the
// tailing goroutine and may block (back-pressure); it should return
// ctx.Err() when ctx is done. An error from fn other than the context's
// stops the Tailer and is returned.
func (t *Tailer) RunFunc(ctx context.Context, fn func(context.Context, Entry) error) error {
	t.mu.Lock()
	if t.state != stateIdle {
		t.mu.Unlock()
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	t.state, t.cancel, t.done = stateRunning, cancel, make(chan struct{})
	t.mu.Unlock()
	t.emitFn = fn
	defer func() {
		cancel()
		t.shutdown()
		t.mu.Lock()
		t.state = stateDone
		close(t.done)
		t.mu.Unlock()
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var nextScan time.Time
	first := true
	for {
		if ctx.Err() != nil {
			return nil
		}
		if now := time.Now(); !now.Before(nextScan) {
			t.scan(first)
			first = false
			nextScan = now.Add(t.cfg.RescanInterval)
		}
		busy := false
		for _, p := range t.order() {
			tf := t.files[p]
			b, err := t.pollFile(ctx, tf)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			busy = busy || b
		}
		t.rounds.Add(1)
		if busy {
			continue
		}
		timer.Reset(t.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}

// Close stops a running Tailer, waits for it to return and releases its
// files. It is safe to call more than once and from any goroutine.
func (t *Tailer) Close() error {
	t.mu.Lock()
	switch t.state {
	case stateIdle:
		t.state = stateDone
		t.mu.Unlock()
		return nil
	case stateDone:
		t.mu.Unlock()
		return nil
	}
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	cancel()
	<-done
	return nil
}

// Prune deletes from pods (a state file's position map) the paths this
// Tailer no longer tails and will not resume: pods that are gone or that the
// filters exclude. Call it when writing the state, so the map does not grow
// with every pod the node ever ran. Before the first scan it keeps
// everything. It returns the number of paths deleted.
func (t *Tailer) Prune(pods map[string]state.PodPos) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.scanned {
		return 0
	}
	n := 0
	for p := range pods {
		c := filepath.Clean(p)
		_, live := t.tracked[c]
		_, waiting := t.start[c]
		if !live && !waiting {
			delete(pods, p)
			n++
		}
	}
	return n
}

// Tailing reports whether path is being tailed.
func (t *Tailer) Tailing(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.tracked[filepath.Clean(path)]
	return ok
}

// order returns the tailed paths in a stable order.
func (t *Tailer) order() []string {
	ps := make([]string, 0, len(t.files))
	for p := range t.files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

func (t *Tailer) shutdown() {
	for p, tf := range t.files {
		for _, s := range tf.queue {
			t.closeSource(s)
		}
		delete(t.files, p)
	}
	t.stats.files.Store(0)
	t.mu.Lock()
	clear(t.tracked)
	t.mu.Unlock()
}

// matchPod applies the filters to a pod directory name.
func (t *Tailer) matchPod(dir string) bool {
	parts := strings.Split(dir, "_")
	if len(parts) != 3 {
		return false
	}
	ns, pod := parts[0], parts[1]
	if len(t.include) > 0 && !anyMatch(t.include, ns) {
		return false
	}
	if anyMatch(t.exclude, ns) {
		return false
	}
	if t.podName != nil && !t.podName.MatchString(pod) {
		return false
	}
	return t.cfg.Allow == nil || t.cfg.Allow(ns, pod, parts[2])
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// scan lists the root for log files not tailed yet and opens them.
func (t *Tailer) scan(first bool) {
	root := t.cfg.Root
	pods, err := os.ReadDir(root)
	if err != nil {
		if !t.rootWarned {
			t.rootWarned = true
			t.stats.errors.Add(1)
			t.log.Warn("cannot list pod log directory, will retry", "root", root, "err", err)
		}
		t.markScanned(nil)
		return
	}
	t.rootWarned = false
	seenDirs := make(map[string]bool, len(pods))
	seenPaths := map[string]bool{}
	for _, pd := range pods {
		if !isDirish(pd) {
			continue
		}
		name := pd.Name()
		seenDirs[name] = true
		ok, known := t.podDirs[name]
		// Allow may say no only because a pod's metadata has not arrived yet: ask again.
		if !known || (!ok && t.cfg.Allow != nil) {
			ok = t.matchPod(name)
			t.podDirs[name] = ok
		}
		if !ok {
			continue
		}
		podDir := filepath.Join(root, name)
		containers, err := os.ReadDir(podDir)
		if err != nil {
			continue // removed while we looked, or unreadable: next scan
		}
		for _, cd := range containers {
			if !isDirish(cd) {
				continue
			}
			meta, err := cri.ParsePodLogPath(filepath.Join(name, cd.Name(), "0.log"))
			if err != nil {
				continue
			}
			cdir := filepath.Join(podDir, cd.Name())
			logs, err := os.ReadDir(cdir)
			if err != nil {
				continue
			}
			for _, lf := range logs {
				if !strings.HasSuffix(lf.Name(), ".log") || lf.IsDir() {
					continue
				}
				p := filepath.Join(cdir, lf.Name())
				seenPaths[p] = true
				if _, ok := t.files[p]; ok {
					continue
				}
				t.add(p, meta, first)
			}
		}
	}
	for name := range t.podDirs {
		if !seenDirs[name] {
			delete(t.podDirs, name)
		}
	}
	for p := range t.openFailed {
		if !seenPaths[p] {
			delete(t.openFailed, p)
		}
	}
	t.markScanned(seenPaths)
}

// markScanned forgets the start positions of paths the scan did not find
// (gone, or excluded): they can no longer be resumed.
func (t *Tailer) markScanned(seen map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seen != nil {
		for p := range t.start {
			if !seen[p] {
				delete(t.start, p)
			}
		}
	}
	t.scanned = true
}

func isDirish(e fs.DirEntry) bool {
	return e.IsDir() || e.Type()&fs.ModeSymlink != 0
}

// add starts tailing path: at its stored position, or from its beginning.
func (t *Tailer) add(path string, meta cri.PodLog, first bool) {
	s, size, err := t.openSource(path)
	if err != nil {
		if !t.openFailed[path] {
			t.openFailed[path] = true
			t.stats.errors.Add(1)
			t.log.Warn("cannot open pod log file, will retry", "path", path, "err", err)
		}
		return
	}
	delete(t.openFailed, path)
	tf := &tailFile{path: path, meta: meta, queue: []*source{s}}

	t.mu.Lock()
	pos, stored := t.start[path]
	delete(t.start, path)
	t.tracked[path] = struct{}{}
	t.mu.Unlock()
	t.stats.files.Add(1)
	t.files[path] = tf

	switch {
	case stored && pos.Inode != 0 && pos.Inode == s.inode:
		switch {
		case pos.Offset > size:
			t.stats.truncations.Add(1)
			t.log.Warn("pod log file is shorter than its stored position, reading it from the start",
				"path", path, "offset", pos.Offset, "size", size)
		case !atLineStart(s.f, pos.Offset):
			// Stored positions always follow a newline. This file
			// took the inode number of a deleted one.
			t.stats.unrecovered.Add(1)
			t.log.Warn("stored position of a pod log file is not at a line start; the file was replaced, reading it from the start",
				"path", path, "offset", pos.Offset)
		default:
			s.pos, s.readPos = pos.Offset, pos.Offset
		}
	case stored:
		if prev := t.findRotated(path, pos); prev != nil {
			tf.queue = []*source{prev, s}
			t.log.Info("pod log file was rotated while stopped; reading the rest of the rotated file first",
				"path", path, "rotated", prev.name, "offset", pos.Offset)
		} else {
			t.stats.unrecovered.Add(1)
			t.log.Warn("pod log file was rotated while stopped and the rotated file is gone; its unread tail is lost",
				"path", path, "stored_inode", pos.Inode, "stored_offset", pos.Offset)
		}
	case first && t.cfg.SkipExisting:
		s.pos, s.readPos = size, size
	}
}

// findRotated looks next to path for an uncompressed rotated file
// (<name>.<suffix>) with the stored inode, opened at the stored offset.
func (t *Tailer) findRotated(path string, pos state.PodPos) *source {
	if pos.Inode == 0 {
		return nil
	}
	dir, base := filepath.Split(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, base+".") || strings.HasSuffix(n, ".gz") || strings.HasSuffix(n, ".tmp") {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || inodeOf(fi) != pos.Inode {
			continue
		}
		s, size, err := t.openSource(filepath.Join(dir, n))
		if err != nil {
			return nil
		}
		if s.inode != pos.Inode || size < pos.Offset || !atLineStart(s.f, pos.Offset) {
			t.closeSource(s)
			return nil
		}
		s.pos, s.readPos, s.final = pos.Offset, pos.Offset, true
		return s
	}
	return nil
}

// atLineStart reports whether off is 0 or follows a newline in f.
func atLineStart(f *os.File, off int64) bool {
	if off == 0 {
		return true
	}
	var b [1]byte
	n, _ := f.ReadAt(b[:], off-1)
	return n == 1 && b[0] == '\n'
}

// openSource opens a log file for reading from offset 0.
func (t *Tailer) openSource(path string) (*source, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	t.stats.filesOpen.Add(1)
	return newSource(f, path, inodeOf(fi), t.cfg.MaxLineSize), fi.Size(), nil
}

func (t *Tailer) closeSource(s *source) {
	if s.f != nil {
		s.f.Close()
		s.f = nil
		t.stats.filesOpen.Add(-1)
	}
}

func (t *Tailer) remove(tf *tailFile) {
	for _, s := range tf.queue {
		t.closeSource(s)
	}
	tf.queue = nil
	delete(t.files, tf.path)
	t.stats.files.Add(-1)
	t.mu.Lock()
	delete(t.tracked, tf.path)
	t.mu.Unlock()
}

// pollFile reads what is new in one tailed path: the rest of rotated files
// first, then the current one; it notices rotation, truncation and removal.
// It reports whether the file has more to read right away.
func (t *Tailer) pollFile(ctx context.Context, tf *tailFile) (bool, error) {
	budget := readBudget
	for {
		s := tf.queue[0]
		n, st, err := t.readSome(ctx, tf, s, &budget)
		if err != nil {
			return false, err
		}
		switch st {
		case readMore:
			return true, nil
		case readFailed:
			return false, nil
		}
		// s is at its end.
		if fi, err := s.f.Stat(); err == nil && fi.Size() < s.readPos {
			// Copytruncate: what is left is new; the pending lines are
			// over. Resuming at 0 neither replays them (their bytes
			// are gone) nor skips what follows.
			if err := t.finish(ctx, tf, s, 0); err != nil {
				return false, err
			}
			s.reset()
			t.stats.truncations.Add(1)
			continue
		}
		if len(tf.queue) > 1 {
			// A newer file took the path. Give the runtime one poll
			// interval to stop writing to the old one, then switch.
			if s.final || (s.eofSeen && n == 0) {
				if err := t.finish(ctx, tf, s, s.readPos); err != nil {
					return false, err
				}
				t.closeSource(s)
				tf.queue = tf.queue[1:]
				continue
			}
			s.eofSeen = true
			return false, nil
		}
		fi, err := os.Stat(tf.path)
		if err == nil && inodeOf(fi) == s.inode {
			tf.missingSince = time.Time{}
			return false, nil
		}
		if err == nil && fi.Mode().IsRegular() {
			ns, _, oerr := t.openSource(tf.path)
			if oerr == nil && ns.inode != s.inode {
				tf.queue = append(tf.queue, ns)
				tf.missingSince = time.Time{}
				s.eofSeen = true
				t.stats.rotations.Add(1)
				return false, nil
			}
			if oerr == nil {
				t.closeSource(ns)
				return false, nil
			}
			err = oerr
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.stats.errors.Add(1)
			return false, nil
		}
		// The path is gone: the pod was deleted, or the file is between
		// a rename and its successor's creation.
		now := time.Now()
		if tf.missingSince.IsZero() {
			tf.missingSince = now
		}
		_, derr := os.Stat(filepath.Dir(tf.path))
		if errors.Is(derr, fs.ErrNotExist) || now.Sub(tf.missingSince) >= t.cfg.GoneAfter {
			if err := t.finish(ctx, tf, s, s.readPos); err != nil {
				return false, err
			}
			t.remove(tf)
		}
		return false, nil
	}
}

type readState int

const (
	readEOF readState = iota
	readMore
	readFailed
)

// readSome reads s from its read position until its end or until budget is
// spent, delivering the lines it completes. It returns the number of bytes
// read. The error is the emitter's (or the context's).
func (t *Tailer) readSome(ctx context.Context, tf *tailFile, s *source, budget *int) (int64, readState, error) {
	var n int64
	for *budget > 0 {
		m, rerr := s.f.ReadAt(t.chunk, s.readPos)
		if m > 0 {
			n += int64(m)
			*budget -= m
			t.stats.bytes.Add(uint64(m))
			if err := t.feed(ctx, tf, s, t.chunk[:m]); err != nil {
				return n, readEOF, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return n, readEOF, nil
		}
		if rerr != nil {
			t.stats.errors.Add(1)
			if !s.readWarned {
				s.readWarned = true
				t.log.Warn("cannot read pod log file, will retry", "path", s.name, "err", rerr)
			}
			return n, readFailed, nil
		}
		s.readWarned = false
	}
	return n, readMore, nil
}

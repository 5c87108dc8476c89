package podlogs

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
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

// ErrClosed is returned by RunFunc on a Tailer that was closed or already ran.
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

// Stats are a Tailer's counters, for the caller's metrics (the exporter's
// faultline_exporter_pod_* metrics).
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
// New, run it once with RunFunc, stop it by cancelling the context.
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

// RunFunc tails until ctx is done, calling fn with every entry on the tailing
// goroutine. fn may block (back-pressure: nothing is buffered beyond a line per
// file) and should return ctx.Err() when ctx is done; any other error from fn
// stops the Tailer and is returned. RunFunc returns nil when stopped and releases
// every file it opened before it returns. A Tailer runs once.
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

// Package packwatch loads the controller's rule packs and reloads them when their
// files change (a ConfigMap mount updates by swapping a symlink). A broken pack is
// rejected with its file:line and the last good set stays active.
package packwatch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

// Config says where packs come from.
type Config struct {
	// Defaults loads the packs built into the binary first.
	Defaults bool
	// Dirs are pack directories or files, loaded after the defaults, in order.
	Dirs []string
	// Taints is which taints the packs may ask for (rules.TaintPolicy; zero: the
	// default).
	Taints rules.TaintPolicy
	// Interval between checks for changed files (default 5s).
	Interval time.Duration
	// OnReload is called with each new engine after a successful (re)load.
	OnReload func(*rules.Engine)
	// OnError is called when a reload fails; the previous engine stays active.
	OnError func(error)
}

// Watcher holds the active engine.
type Watcher struct {
	cfg     Config
	current atomic.Pointer[rules.Engine]
	digest  string
}

// New loads the packs once; an error here is fatal for the caller (there is no last
// good set yet).
func New(cfg Config) (*Watcher, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if !cfg.Defaults && len(cfg.Dirs) == 0 {
		return nil, fmt.Errorf("no rule packs: enable the defaults or give a pack directory")
	}
	if err := cfg.Taints.Check(); err != nil {
		return nil, fmt.Errorf("taint allowance: %w", err)
	}
	w := &Watcher{cfg: cfg}
	d, err := w.fingerprint()
	if err != nil {
		return nil, err
	}
	e, err := w.load()
	if err != nil {
		return nil, err
	}
	w.digest = d
	w.current.Store(e)
	if cfg.OnReload != nil {
		cfg.OnReload(e)
	}
	return w, nil
}

// Engine returns the active engine.
func (w *Watcher) Engine() *rules.Engine { return w.current.Load() }

// Run checks for changes every Interval until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Check()
		}
	}
}

// Check reloads if the pack files changed since the last attempt. It reports whether
// a new engine became active.
func (w *Watcher) Check() bool {
	d, err := w.fingerprint()
	if err != nil {
		w.fail(err)
		return false
	}
	if d == w.digest {
		return false
	}
	// Remember the digest even on failure, so a broken pack is reported once, not
	// every interval; the next edit triggers a new attempt.
	w.digest = d
	e, err := w.load()
	if err != nil {
		w.fail(err)
		return false
	}
	w.current.Store(e)
	if w.cfg.OnReload != nil {
		w.cfg.OnReload(e)
	}
	return true
}

func (w *Watcher) fail(err error) {
	if w.cfg.OnError != nil {
		w.cfg.OnError(err)
	}
}

func (w *Watcher) load() (*rules.Engine, error) {
	// The default packs' tests and sources are checked by `make test`; the
	// controller only matches with them. An operator's packs are loaded whole.
	ds, ps, err := packs.Layered(w.cfg.Defaults, rules.Loader{MatchingOnly: true, Checked: true, Taints: w.cfg.Taints},
		rules.Loader{Taints: w.cfg.Taints}, w.cfg.Dirs...)
	if err != nil {
		return nil, err
	}
	return rules.CompileEngine(append(ds, ps...))
}

// fingerprint hashes the names and contents of every pack file, following symlinks.
func (w *Watcher) fingerprint() (string, error) {
	h := sha256.New()
	for _, d := range w.cfg.Dirs {
		var files []string
		st, err := os.Stat(d)
		if err != nil {
			return "", fmt.Errorf("pack path: %w", err)
		}
		if st.IsDir() {
			ents, err := os.ReadDir(d)
			if err != nil {
				return "", fmt.Errorf("pack dir: %w", err)
			}
			for _, e := range ents {
				n := e.Name()
				if !strings.HasPrefix(n, ".") && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
					files = append(files, filepath.Join(d, n))
				}
			}
			sort.Strings(files)
		} else {
			files = []string{d}
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			// A file can vanish while a ConfigMap mount swaps its symlink: the
			// next check sees the new content.
			if err != nil && !os.IsNotExist(err) {
				return "", fmt.Errorf("read pack: %w", err)
			}
			fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
			h.Write(b)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

package podlogs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

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

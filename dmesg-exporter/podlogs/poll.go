package podlogs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

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
			// Lines written between the read above and the removal are still in
			// the open file: read them before giving it up.
			m, st, err := t.readSome(ctx, tf, s, &budget)
			if err != nil {
				return false, err
			}
			if m > 0 || st == readMore {
				return true, nil
			}
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

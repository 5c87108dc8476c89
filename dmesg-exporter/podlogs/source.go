package podlogs

import (
	"bytes"
	"context"
	"os"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

// tailFile is one tailed path. Its queue holds the files that were at that
// path, oldest first: the head is read to its end before the next one is
// started, so a path's entries come in file order and its offsets only move
// forward within a file.
type tailFile struct {
	path         string
	meta         cri.PodLog
	queue        []*source
	missingSince time.Time
}

// source is one open log file and the reading state in it.
type source struct {
	f     *os.File
	name  string // where it was opened, for messages
	inode uint64
	max   int

	// pos is the offset of the first byte not yet part of a processed
	// line; readPos is the offset of the next byte to read. buf holds the
	// bytes between them (only the first physCap of them when skipping,
	// i.e. while the line is too long and its rest is discarded).
	pos, readPos int64
	buf          []byte
	skipping     bool

	// final marks a rotated file found at start: read it to its end and
	// move on, nobody writes to it any more. eofSeen marks a file with a
	// successor that was at its end on the previous round.
	final, eofSeen bool
	readWarned     bool
	parseWarned    bool

	re *cri.Reassembler
	// Per stream (stdout, stderr): the offset of the first CRI line of
	// the unfinished partial run, or -1; the line the reassembler already
	// cut at the size cap while its final part has not been read yet; and
	// whether a raw line of the run was cut for being too long.
	runStart [2]int64
	held     [2]*cri.Line
	cut      [2]bool
}

func newSource(f *os.File, name string, inode uint64, max int) *source {
	s := &source{f: f, name: name, inode: inode, max: max}
	s.reset()
	return s
}

// reset starts over at offset 0 with no pending lines.
func (s *source) reset() {
	s.pos, s.readPos, s.buf, s.skipping, s.eofSeen = 0, 0, nil, false, false
	s.re = cri.NewReassembler(s.max)
	s.runStart = [2]int64{-1, -1}
	s.held = [2]*cri.Line{}
	s.cut = [2]bool{}
}

// keep appends data to the unfinished raw line, up to limit bytes; past
// that the line is cut and the rest discarded.
func (s *source) keep(data []byte, limit int) {
	if s.skipping {
		return
	}
	if room := limit - len(s.buf); len(data) > room {
		s.buf = append(s.buf, data[:room]...)
		s.skipping = true
		return
	}
	s.buf = append(s.buf, data...)
}

// commit returns the resume offset after a line that ends at end: end,
// unless a partial run of either stream is still open, whose start must be
// read again after a restart.
func (s *source) commit(end int64) int64 {
	for _, r := range s.runStart {
		if r >= 0 && r < end {
			end = r
		}
	}
	return end
}

func streamIndex(st cri.Stream) int {
	if st == cri.Stderr {
		return 1
	}
	return 0
}

// feed splits newly read bytes into raw lines and processes them.
func (t *Tailer) feed(ctx context.Context, tf *tailFile, s *source, data []byte) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			s.keep(data, t.physCap)
			s.readPos += int64(len(data))
			return nil
		}
		seg := data[:i]
		data = data[i+1:]
		s.readPos += int64(i + 1)
		var line []byte
		var cut bool
		if len(s.buf) == 0 && !s.skipping {
			line = seg
			if len(line) > t.physCap {
				line, cut = line[:t.physCap], true
			}
		} else {
			s.keep(seg, t.physCap)
			line, cut = s.buf, s.skipping
		}
		err := t.line(ctx, tf, s, line, s.pos, s.readPos, cut)
		s.pos = s.readPos
		s.skipping = false
		if cap(s.buf) > 64<<10 {
			s.buf = nil // do not pin a buffer for one long line
		} else {
			s.buf = s.buf[:0]
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// line processes one raw CRI line that spans [start, end) in the file.
func (t *Tailer) line(ctx context.Context, tf *tailFile, s *source, raw []byte, start, end int64, cut bool) error {
	e, err := cri.ParseLine(raw)
	if err != nil {
		t.stats.malformed.Add(1)
		if !s.parseWarned {
			s.parseWarned = true
			t.log.Warn("malformed CRI log line skipped (further ones in this file are only counted)",
				"path", s.name, "offset", start, "err", err)
		}
		return nil
	}
	si := streamIndex(e.Stream)
	if cut {
		s.cut[si] = true
	}
	if e.Partial && s.runStart[si] < 0 {
		s.runStart[si] = start
	}
	l, ok := s.re.Add(e)
	switch {
	case ok && e.Partial:
		// Cut at the size cap; the rest of the run is dropped. Deliver
		// it with its final part, so the offset is right.
		held := l // a copy, so l itself stays off the heap
		s.held[si] = &held
		return nil
	case ok:
	case !e.Partial && s.held[si] != nil:
		l, s.held[si] = *s.held[si], nil
	default:
		return nil
	}
	s.runStart[si] = -1
	c := s.cut[si]
	s.cut[si] = false
	return t.emit(ctx, tf, s, l, s.commit(end), c)
}

// finish ends a file for good (rotated away, truncated, deleted): an
// unterminated last line is processed, and partial lines whose final part
// never came are delivered as incomplete, with offset off.
func (t *Tailer) finish(ctx context.Context, tf *tailFile, s *source, off int64) error {
	if len(s.buf) > 0 || s.skipping {
		raw, cut := s.buf, s.skipping
		s.buf, s.skipping = nil, false
		if err := t.line(ctx, tf, s, raw, s.pos, off, cut); err != nil {
			return err
		}
	}
	s.pos = s.readPos
	flushed := s.re.Flush()
	for si := range s.held {
		var l cri.Line
		if h := s.held[si]; h != nil {
			l = *h
		} else {
			found := false
			for _, f := range flushed {
				if streamIndex(f.Stream) == si {
					l, found = f, true
				}
			}
			if !found {
				continue
			}
		}
		l.Incomplete = true
		s.held[si], s.runStart[si] = nil, -1
		c := s.cut[si]
		s.cut[si] = false
		if err := t.emit(ctx, tf, s, l, off, c); err != nil {
			return err
		}
	}
	s.runStart = [2]int64{-1, -1}
	return nil
}

// emit delivers one line.
func (t *Tailer) emit(ctx context.Context, tf *tailFile, s *source, l cri.Line, off int64, cut bool) error {
	e := Entry{
		Path: tf.path, Pos: state.PodPos{Inode: s.inode, Offset: off},
		Time: l.Time, Stream: l.Stream,
		Namespace: tf.meta.Namespace, Pod: tf.meta.Pod, UID: tf.meta.UID, Container: tf.meta.Container,
		Message: l.Message, Truncated: l.Truncated || cut, Incomplete: l.Incomplete,
	}
	if cut && !l.Truncated {
		e.Message = cri.Truncate(e.Message, s.re.MaxSize())
	}
	if err := t.emitFn(ctx, e); err != nil {
		return err
	}
	t.stats.lines.Add(1)
	if e.Truncated {
		t.stats.truncated.Add(1)
	}
	return nil
}

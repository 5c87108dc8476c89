package scan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// chunkSize is how much of the input one worker parses and matches at a time.
const chunkSize = 1 << 20

// chunk is whole lines of the input, and what a worker made of them.
type chunk struct {
	buf []byte
	// cut: buf is one line cut at MaxLineBytes (the rest of it was skipped).
	cut   bool
	lines []line
	done  chan struct{}
}

// scanParallel reads the input in chunks of whole lines, parses and matches them on
// workers, and consumes the lines in input order. At most a few chunks per worker
// are in flight.
func (s *Scanner) scanParallel(ctx context.Context, r io.Reader, c *consumer, workers int) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred below): workers end when the reader does
	defer cancel()
	jobs := make(chan *chunk, workers)
	order := make(chan *chunk, 2*workers)
	free := make(chan *chunk, 3*workers+2)
	get := func() *chunk {
		select {
		case ch := <-free:
			return ch
		default:
			return &chunk{buf: make([]byte, 0, chunkSize)}
		}
	}
	var readErr error
	go func() {
		defer close(jobs)
		defer close(order)
		readErr = readChunks(r, get, func(ch *chunk) bool {
			ch.done = make(chan struct{})
			select {
			case order <- ch:
			case <-ctx.Done():
				return false
			}
			select {
			case jobs <- ch:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := s.newWorker()
			for ch := range jobs {
				s.prepareChunk(ch, w)
				close(ch.done)
			}
		}()
	}
	for ch := range order {
		select {
		case <-ch.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i := range ch.lines {
			if err := s.consume(c, &ch.lines[i]); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case free <- ch:
		default:
		}
	}
	if readErr != nil {
		return fmt.Errorf("read line %d: %w", c.lineNo+1, readErr)
	}
	// A reader stopped by a cancelled context ends the chunks early.
	return ctx.Err()
}

// prepareChunk splits a chunk into lines and parses and matches each.
func (s *Scanner) prepareChunk(ch *chunk, w *worker) {
	n := 0
	next := func() *line {
		if n == len(ch.lines) {
			ch.lines = append(ch.lines, line{})
		}
		n++
		return &ch.lines[n-1]
	}
	if ch.cut {
		s.prepare(w, ch.buf, true, next())
	} else {
		for b := ch.buf; len(b) > 0; {
			end := bytes.IndexByte(b, '\n') + 1
			if end == 0 {
				end = len(b)
			}
			s.prepare(w, b[:end], false, next())
			b = b[end:]
		}
	}
	ch.lines = ch.lines[:n]
}

// readChunks reads r into chunks that end at a line's end (or at the input's end)
// and sends them in order; a line longer than MaxLineBytes is sent alone, cut, and
// the rest of it skipped. It stops when send returns false.
func readChunks(r io.Reader, get func() *chunk, send func(*chunk) bool) error {
	var carry []byte // the start of a line the previous read ended in
	for {
		ch := get()
		if cap(ch.buf) < len(carry)+chunkSize {
			ch.buf = make([]byte, 0, len(carry)+chunkSize)
		}
		ch.buf, ch.cut = append(ch.buf[:0], carry...), false
		carry = carry[:0]
		var err error
		for len(ch.buf) < cap(ch.buf) && err == nil {
			var k int
			k, err = r.Read(ch.buf[len(ch.buf):cap(ch.buf)])
			ch.buf = ch.buf[:len(ch.buf)+k]
		}
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return err
		}
		if eof {
			if len(ch.buf) > 0 {
				send(ch)
			}
			return nil
		}
		last := bytes.LastIndexByte(ch.buf, '\n')
		if last >= 0 {
			carry = append(carry, ch.buf[last+1:]...)
			ch.buf = ch.buf[:last+1]
			if !send(ch) {
				return nil
			}
			continue
		}
		// No line end in a full buffer: one long line.
		if len(ch.buf) <= MaxLineBytes {
			carry = append(carry, ch.buf...) // read on with a larger buffer
			continue
		}
		ch.buf, ch.cut = ch.buf[:MaxLineBytes], true
		rest, err := skipToLineEnd(r)
		if !send(ch) {
			return nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		carry = append(carry, rest...)
	}
}

// skipToLineEnd reads past the next line end and returns what followed it in the
// last read.
func skipToLineEnd(r io.Reader) ([]byte, error) {
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		if i := bytes.IndexByte(buf[:k], '\n'); i >= 0 {
			return buf[i+1 : k], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

package kmsg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Framing says how records are delimited in the input.
type Framing int

const (
	// FramingAuto uses FramingRecord for a character device (the /dev/kmsg
	// device) and FramingStream for anything else.
	FramingAuto Framing = iota
	// FramingRecord: every successful Read returns exactly one record, as
	// read() on /dev/kmsg does.
	FramingRecord
	// FramingStream: records follow one another, each a header-and-message
	// line ended by '\n' and followed by its dictionary lines (lines that
	// begin with a space). NUL bytes before a record are skipped, so files
	// of NUL-separated records (util-linux dmesg --kmsg-file) work too, and
	// blank lines are ignored.
	FramingStream
)

// Start says where an opened Reader begins.
type Start int

const (
	// StartOldest begins with the oldest record still held (the device's
	// position after open), or the start of a file.
	StartOldest Start = iota
	// StartEnd begins after the newest record (SEEK_END): only records
	// logged from now on, or appended to a file from now on. Open fails
	// with it on a pipe.
	StartEnd
	// StartAfterClear begins after the last "dmesg --clear" (SEEK_DATA on
	// the device). Only valid on the device.
	StartAfterClear
)

// Default values of Options fields.
const (
	DefaultMaxRecordSize    = 1 << 20
	DefaultDictWait         = 20 * time.Millisecond
	DefaultContinuationWait = 20 * time.Millisecond
	// initialBufSize exceeds the largest record current kernels emit
	// (8 KiB); the buffer grows up to MaxRecordSize if the device rejects
	// it as too small.
	initialBufSize = 16 << 10
	seekData       = 3 // SEEK_DATA
)

// Loss describes records the reader could not deliver because the kernel
// dropped them or the input skipped over them.
type Loss struct {
	// After is the last sequence number seen before the gap (or the
	// position passed to SeekAfter).
	After uint64
	// Next is the first sequence number seen after the gap.
	Next uint64
	// Count is the number of records missing, Next-After-1. It is 0 when
	// the kernel reported an overrun before any position was known; the
	// loss is then real but cannot be counted.
	Count uint64
	// Overrun is true when the kernel reported (EPIPE) that the ring
	// buffer overwrote records before they were read.
	Overrun bool
}

// Options configure a Reader. The zero value is usable.
type Options struct {
	// Framing of the input; FramingAuto by default.
	Framing Framing
	// Start position for Open.
	Start Start
	// BootTime is used to set Record.Time. When zero, the reader calls
	// BootTime() once; if that fails, Record.Time stays zero.
	BootTime time.Time
	// MaxRecordSize bounds one record in bytes, dictionary included
	// (DefaultMaxRecordSize when 0). Larger stream records are skipped and
	// reported as malformed with ErrTooLong; on the device it bounds the
	// read buffer.
	MaxRecordSize int
	// DictWait is how long a stream reader on a pipe waits, after a
	// message line, for dictionary lines to arrive before it delivers the
	// record without them (DefaultDictWait when 0). Regular files never
	// wait.
	DictWait time.Duration
	// MergeContinuations joins continuation fragments (flags 'c' and '+')
	// to the record they continue, as console output does. A merged record
	// keeps its first fragment's header; Message is the fragments'
	// concatenation, LastSeq the last fragment's seq. On current kernels
	// a 'c' record continues the record before it, if that has the same
	// caller; a stream that contains '+' records is taken to come from a
	// kernel before 4.10, where 'c' starts a line and '+' continues it.
	MergeContinuations bool
	// ContinuationWait is how long, with MergeContinuations, the reader
	// waits for another fragment before it delivers a record
	// (DefaultContinuationWait when 0). The wait only applies to inputs
	// with read deadlines (the device, pipes); other inputs deliver a
	// record when the next one or EOF is read. On every input a fragment
	// the kernel logged more than ContinuationWait after the record
	// before it stands alone, so records read late join as they would
	// have live.
	ContinuationWait time.Duration
	// OnLoss, when set, is called for every gap in the sequence numbers
	// and every overrun.
	OnLoss func(Loss)
	// OnMalformed, when set, is called with each record the reader could
	// not parse (raw is only valid during the call; it may be cut short
	// for records over MaxRecordSize).
	OnMalformed func(raw []byte, err error)
}

// counters are the reader's running counts (read by its tests).
type counters struct {
	records, malformed, lost, gaps, overruns, regressions, skipped, merged atomic.Uint64
}

// errWouldBlock: no input arrived within the wait.
var errWouldBlock = errors.New("kmsg: no data within wait")

// waitForever asks a read to block until data, EOF or cancellation.
const waitForever time.Duration = -1

type deadliner interface {
	SetReadDeadline(time.Time) error
}

// Reader reads records from /dev/kmsg, or from a file or pipe holding
// records in the same format.
//
// Next must not be called concurrently; Close may be called from
// any goroutine.
type Reader struct {
	opts    Options
	src     io.Reader
	file    *os.File // nil for a reader over a non-file (the tests')
	closer  io.Closer
	dl      deadliner // nil when the input has no read deadlines
	framing Framing
	max     int
	boot    time.Time

	// FramingRecord
	buf     []byte
	readErr error // error returned together with data, reported next time

	// FramingStream
	br         *bufio.Reader
	line       []byte // partial line carried over a failed read
	lineCut    bool   // the line being read exceeds max; line holds its start
	rec        []byte // record being assembled
	inRec      bool   // rec holds a complete first line; looking for dictionary lines
	recTooLong bool   // the record being assembled exceeds max

	// sequence tracking
	haveLast    bool
	last        uint64
	skipping    bool
	skipThrough uint64
	overrun     bool

	join joiner

	mu          sync.Mutex // guards the deadline state below
	interrupted bool
	deadlineSet bool

	stats counters
}

// Open opens path (DefaultDevice when empty) for reading. Opening a FIFO
// blocks until a writer opens it, as open(2) does.
func Open(path string, opts Options) (*Reader, error) {
	if path == "" {
		path = DefaultDevice
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	isDev := fi.Mode()&os.ModeCharDevice != 0
	if opts.Framing == FramingAuto {
		opts.Framing = FramingStream
		if isDev {
			opts.Framing = FramingRecord
		}
	}
	switch opts.Start {
	case StartOldest:
	case StartEnd:
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			f.Close()
			return nil, fmt.Errorf("kmsg: %s: cannot start at the end: %w", path, err)
		}
	case StartAfterClear:
		if !isDev {
			f.Close()
			return nil, fmt.Errorf("kmsg: %s: StartAfterClear needs the kmsg device", path)
		}
		if _, err := f.Seek(0, seekData); err != nil {
			f.Close()
			return nil, fmt.Errorf("kmsg: %s: cannot seek after the last clear: %w", path, err)
		}
	default:
		f.Close()
		return nil, fmt.Errorf("kmsg: unknown Start %d", opts.Start)
	}
	r := newReader(f, opts)
	r.file, r.closer = f, f
	// Pollable inputs (the device, FIFOs) support deadlines; regular files
	// never block and do not.
	if f.SetReadDeadline(time.Time{}) == nil {
		r.dl = f
	}
	return r, nil
}

func newReader(src io.Reader, opts Options) *Reader {
	if opts.MaxRecordSize <= 0 {
		opts.MaxRecordSize = DefaultMaxRecordSize
	}
	if opts.DictWait <= 0 {
		opts.DictWait = DefaultDictWait
	}
	if opts.ContinuationWait <= 0 {
		opts.ContinuationWait = DefaultContinuationWait
	}
	r := &Reader{opts: opts, src: src, framing: opts.Framing, max: opts.MaxRecordSize, boot: opts.BootTime}
	r.join.merged = &r.stats.merged
	r.join.gap = opts.ContinuationWait
	if r.boot.IsZero() {
		if t, err := BootTime(); err == nil {
			r.boot = t
		}
	}
	switch r.framing {
	case FramingRecord:
		r.buf = make([]byte, min(initialBufSize, r.max))
	default:
		r.framing = FramingStream
		r.br = bufio.NewReaderSize(src, 64<<10)
	}
	return r
}

// Close closes the input. A Next blocked on a pollable input returns an
// error that satisfies errors.Is(err, os.ErrClosed).
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// SeekAfter makes the reader deliver only records with a seq above seq, and
// counts a gap between seq and the first record it finds as lost (records
// the ring buffer overwrote while nobody was reading). Call it before the
// first Next, with a seq from the same boot (see ReadBootID).
//
// On the device and on regular files it first rewinds to the oldest record;
// on pipes and other inputs it only skips.
func (r *Reader) SeekAfter(seq uint64) error {
	if r.file != nil {
		if _, err := r.file.Seek(0, io.SeekStart); err == nil {
			if r.br != nil {
				r.br.Reset(r.src)
			}
			r.line, r.lineCut, r.rec, r.inRec, r.readErr = r.line[:0], false, r.rec[:0], false, nil
		} else if !errors.Is(err, syscall.ESPIPE) {
			return fmt.Errorf("kmsg: rewind: %w", err)
		}
	}
	r.skipping, r.skipThrough = true, seq
	r.haveLast, r.last, r.overrun = true, seq, false
	return nil
}

// Next returns the next record. It blocks until a record arrives, the input
// ends (io.EOF; a regular file may be read again after it grows), ctx is
// done (ctx.Err()), or the reader is closed. Malformed records, sequence
// gaps and overruns do not stop it: they are counted and reported
// through Options.OnMalformed and Options.OnLoss.
func (r *Reader) Next(ctx context.Context) (Record, error) {
	if rec, ok := r.join.pop(); ok {
		return r.deliver(rec), nil
	}
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	defer r.watch(ctx)()
	for {
		wait := waitForever
		if r.join.hasPending() {
			wait = r.opts.ContinuationWait
			if r.dl == nil {
				wait = 0 // no deadlines: a read returns at once or at EOF
			}
		}
		rec, err := r.readRecord(ctx, wait)
		if err == nil {
			if !r.opts.MergeContinuations {
				return r.deliver(rec), nil
			}
			r.join.push(rec)
			if out, ok := r.join.pop(); ok {
				return r.deliver(out), nil
			}
			continue
		}
		if r.join.hasPending() && (errors.Is(err, errWouldBlock) || errors.Is(err, io.EOF)) {
			r.join.flush()
			out, _ := r.join.pop()
			return r.deliver(out), nil
		}
		if errors.Is(err, errWouldBlock) {
			continue
		}
		return Record{}, err
	}
}

func (r *Reader) deliver(rec Record) Record {
	if !r.boot.IsZero() {
		rec.Time = r.boot.Add(rec.Monotonic)
	}
	r.stats.records.Add(1)
	return rec
}

// watch arranges for a blocked read to return when ctx is done, and
// returns the function that undoes that.
func (r *Reader) watch(ctx context.Context) func() {
	r.mu.Lock()
	if r.interrupted && r.dl != nil {
		r.interrupted = false
		r.dl.SetReadDeadline(time.Time{})
		r.deadlineSet = false
	}
	r.mu.Unlock()
	if r.dl == nil || ctx.Done() == nil {
		return func() {}
	}
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.interrupted = true
		r.dl.SetReadDeadline(time.Unix(1, 0))
		r.mu.Unlock()
		close(done)
	})
	return func() {
		if !stop() {
			<-done
		}
	}
}

// setWait bounds the next read to wait (waitForever: no bound).
func (r *Reader) setWait(wait time.Duration) {
	if r.dl == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.interrupted {
		return
	}
	if wait < 0 {
		if r.deadlineSet {
			r.dl.SetReadDeadline(time.Time{})
			r.deadlineSet = false
		}
		return
	}
	r.dl.SetReadDeadline(time.Now().Add(wait))
	r.deadlineSet = true
}

// readErrMap turns a deadline error into ctx.Err() or errWouldBlock.
func readErrMap(ctx context.Context, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return errWouldBlock
	}
	return err
}

// readRecord reads, parses and accounts for records until one is to be
// delivered.
func (r *Reader) readRecord(ctx context.Context, wait time.Duration) (Record, error) {
	for {
		var raw []byte
		var tooLong bool
		var err error
		if r.framing == FramingRecord {
			raw, err = r.readDevice(ctx, wait)
		} else {
			raw, tooLong, err = r.readStream(ctx, wait)
		}
		if err != nil {
			return Record{}, err
		}
		if tooLong {
			r.malformed(raw, parseErr("record", 0, raw, ErrTooLong))
			continue
		}
		rec, err := Parse(raw)
		if err != nil {
			r.malformed(raw, err)
			continue
		}
		if r.skipping && rec.Seq <= r.skipThrough {
			r.stats.skipped.Add(1)
			continue
		}
		r.track(rec.Seq)
		return rec, nil
	}
}

func (r *Reader) malformed(raw []byte, err error) {
	r.stats.malformed.Add(1)
	if r.opts.OnMalformed != nil {
		r.opts.OnMalformed(raw, err)
	}
}

// track updates the sequence position and reports gaps.
func (r *Reader) track(seq uint64) {
	switch {
	case !r.haveLast:
		if r.overrun {
			r.loss(Loss{Next: seq, Overrun: true})
		}
	case seq > r.last && seq-r.last > 1:
		r.loss(Loss{After: r.last, Next: seq, Count: seq - r.last - 1, Overrun: r.overrun})
	case seq <= r.last:
		r.stats.regressions.Add(1)
	}
	r.overrun = false
	r.haveLast, r.last = true, seq
}

func (r *Reader) loss(l Loss) {
	if l.Count > 0 {
		r.stats.gaps.Add(1)
		r.stats.lost.Add(l.Count)
	}
	if r.opts.OnLoss != nil {
		r.opts.OnLoss(l)
	}
}

// readDevice returns the next record of a FramingRecord input.
func (r *Reader) readDevice(ctx context.Context, wait time.Duration) ([]byte, error) {
	if err := r.readErr; err != nil {
		r.readErr = nil
		return nil, err
	}
	empty := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.setWait(wait)
		n, err := r.src.Read(r.buf)
		if n > 0 {
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				r.readErr = err
			}
			return r.buf[:n], nil
		}
		switch {
		case err == nil:
			if empty++; empty >= 100 {
				return nil, io.ErrNoProgress
			}
		case errors.Is(err, syscall.EPIPE):
			// The kernel overwrote records we had not read yet and moved
			// our position to the oldest one it still holds. The gap
			// shows in the next record's seq.
			r.stats.overruns.Add(1)
			r.overrun = true
		case errors.Is(err, syscall.EINVAL) && len(r.buf) < r.max:
			// The buffer is smaller than the record.
			r.buf = make([]byte, min(2*len(r.buf), r.max))
		default:
			return nil, readErrMap(ctx, err)
		}
	}
}

// readStream returns the next record of a FramingStream input: its first
// line and the dictionary lines that follow it. tooLong reports a record
// over the size limit; raw then holds only its beginning.
func (r *Reader) readStream(ctx context.Context, wait time.Duration) (raw []byte, tooLong bool, err error) {
	for !r.inRec {
		line, cut, err := r.readLine(ctx, wait)
		if err != nil {
			return nil, false, err
		}
		line = bytes.TrimLeft(line, "\x00")
		switch {
		case cut:
			r.malformed(line, parseErr("record", 0, line, ErrTooLong))
			continue
		case len(line) == 0:
			continue
		case line[0] == ' ':
			r.malformed(line, parseErr("dict", 0, line, ErrOrphanDict))
			continue
		}
		r.rec = append(r.rec[:0], line...)
		r.inRec, r.recTooLong = true, false
	}
	for {
		if len(r.line) == 0 {
			// Does a dictionary line follow? Any error here (EOF, a
			// timeout, cancellation) ends the record; the error shows
			// again on the next read.
			c, err := r.peek(ctx, r.opts.DictWait)
			if err != nil || c != ' ' {
				break
			}
		}
		line, cut, err := r.readLine(ctx, wait)
		if err != nil {
			// Mid-line: keep the record and resume on the next call.
			return nil, false, err
		}
		if cut || len(r.rec)+1+len(line) > r.max {
			r.recTooLong = true
			continue
		}
		r.rec = append(r.rec, '\n')
		r.rec = append(r.rec, line...)
	}
	r.inRec = false
	return r.rec, r.recTooLong, nil
}

// peek returns the next input byte without consuming it, waiting at most
// wait for it to arrive.
func (r *Reader) peek(ctx context.Context, wait time.Duration) (byte, error) {
	if r.br.Buffered() == 0 {
		r.setWait(wait)
	}
	b, err := r.br.Peek(1)
	if err != nil {
		return 0, readErrMap(ctx, err)
	}
	return b[0], nil
}

// readLine returns the next line without its '\n'; a last line without
// '\n' is returned at EOF. The result is valid until the next read. A line
// over the size limit is consumed whole and returned cut to its first 64
// bytes, with cut set. When a read fails mid-line the part read so far is
// kept for the next call.
func (r *Reader) readLine(ctx context.Context, wait time.Duration) (line []byte, cut bool, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		r.setWait(wait)
		chunk, err := r.br.ReadSlice('\n')
		n := len(r.line) + len(chunk)
		if err == nil {
			n-- // the '\n' is not part of the line
			if len(r.line) == 0 && n <= r.max {
				return chunk[:n], false, nil
			}
		}
		if r.lineCut || n > r.max {
			if !r.lineCut {
				r.lineCut = true
				r.line = r.line[:min(len(r.line), 64)]
			}
			if keep := 64 - len(r.line); keep > 0 {
				r.line = append(r.line, chunk[:min(keep, len(chunk))]...)
			}
		} else {
			r.line = append(r.line, chunk...)
		}
		if err == nil || (errors.Is(err, io.EOF) && len(r.line) > 0) {
			line, cut = bytes.TrimSuffix(r.line, []byte("\n")), r.lineCut
			r.line, r.lineCut = r.line[:0], false
			return line, cut, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return nil, false, readErrMap(ctx, err)
	}
}

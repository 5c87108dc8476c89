// Package exporter is the dmesg-exporter: it reads a GPU node's kernel log
// (/dev/kmsg) and its training pods' log files, and ships every line to an
// OpenTelemetry Collector (OTLP/HTTP) or straight to Loki, none lost and none
// replayed: the read position is persisted only after the receiver acknowledged.
//
// Stages, each one job: sources (kernel, pods) → a bounded buffer (back-pressure
// instead of unbounded growth) → batcher → sender with retries → position commit.
package exporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/kmsg"
	"github.com/faultline-dev/faultline/dmesg-exporter/podlogs"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

// Config configures an Exporter.
type Config struct {
	Node       string
	KmsgPath   string // /dev/kmsg, or a file/FIFO in the same format
	BootIDPath string
	// BootTime overrides the boot time used to turn kernel timestamps into wall
	// time (tests; a zero value reads the system's).
	BootTime time.Time
	// AllFacilities ships user-space records written to /dev/kmsg too; by default
	// only the kernel facility is shipped.
	AllFacilities bool
	StatePath     string

	Sender ship.Sender
	// Backoff for retries of failed sends.
	Backoff ship.Backoff

	BatchSize    int           // records per batch (default 500)
	BatchWait    time.Duration // longest a record waits for its batch to fill (default 1s)
	BufferSize   int           // records buffered between readers and the sender (default 10000)
	PollInterval time.Duration // how often a regular file at EOF is checked for growth (default 200ms)
	// StallAfter: /healthz fails when a reader has made no progress for this long
	// while the buffer had room (default 2m).
	StallAfter time.Duration
	// ShutdownGrace is how long, after ctx is done, the exporter keeps trying to
	// ship what it already read, so a rolling restart loses nothing (default 10s).
	ShutdownGrace time.Duration

	// PodLogs, when set, tails pod log files too (its Start positions come from
	// the state file).
	PodLogs *podlogs.Config

	Metrics *Metrics
	Log     *slog.Logger
}

// PodAck is the acknowledged position of one pod log file.
type PodAck struct {
	Path   string
	Inode  uint64
	Offset int64
}

// Item is a record in flight with the position to commit once it is shipped.
type Item struct {
	Rec ship.Record
	// Kernel records: Seq in Rec. Pod records: Pod is set.
	Pod *PodAck
}

// Exporter ships one node's logs.
type Exporter struct {
	cfg      Config
	store    *state.Store
	bootID   string
	buf      chan Item
	log      *slog.Logger
	m        *Metrics
	progress atomic.Int64 // unix nanos of the kernel reader's last progress
	blocked  atomic.Bool  // the kernel reader waits for room in the buffer
	readErr  atomic.Value // error that stopped the kernel reader
	pods     *podlogs.Tailer
}

// New checks the configuration, opens the state file and reads the boot id.
func New(cfg Config) (*Exporter, error) {
	if cfg.Node == "" {
		return nil, errors.New("exporter: node name is required")
	}
	if cfg.Sender == nil {
		return nil, errors.New("exporter: a sender (OTLP endpoint or Loki URL) is required")
	}
	if cfg.KmsgPath == "" {
		cfg.KmsgPath = kmsg.DefaultDevice
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.BatchWait <= 0 {
		cfg.BatchWait = time.Second
	}
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = 10000
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = 2 * time.Minute
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	st, err := state.Open(cfg.StatePath)
	if err != nil {
		return nil, err
	}
	bootID, err := kmsg.ReadBootID(cfg.BootIDPath)
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	// Kernel timestamps are boot time + the record's monotonic time. Computing the
	// boot time again after a restart would shift them by a few microseconds, and a
	// batch re-sent after a crash would no longer match the copy the receiver
	// already holds; so the first boot time of a boot is kept in the state file.
	if cfg.BootTime.IsZero() {
		if prev := st.Get(); prev.BootID == bootID && !prev.BootTime.IsZero() {
			cfg.BootTime = prev.BootTime
		} else if cfg.BootTime, err = kmsg.BootTime(); err != nil {
			return nil, fmt.Errorf("exporter: %w", err)
		}
	}
	e := &Exporter{cfg: cfg, store: st, bootID: bootID, buf: make(chan Item, cfg.BufferSize), log: cfg.Log, m: cfg.Metrics}
	e.m.bufferCapacity.Set(float64(cfg.BufferSize))
	if cfg.PodLogs != nil {
		pc := *cfg.PodLogs
		pc.Start = st.Get().Pods
		if pc.Log == nil {
			pc.Log = cfg.Log
		}
		if e.pods, err = podlogs.New(pc); err != nil {
			return nil, fmt.Errorf("exporter: pod logs: %w", err)
		}
	}
	e.progress.Store(time.Now().UnixNano())
	return e, nil
}

// Run reads and ships until ctx is done. It returns the error that stopped a source
// or the sender; records acknowledged before are never shipped again.
func (e *Exporter) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := e.readKernel(ctx); err != nil && ctx.Err() == nil {
			e.readErr.Store(err)
			cancel(fmt.Errorf("kernel reader: %w", err))
		}
	}()
	if e.pods != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.readPods(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("pod logs: %w", err))
			}
		}()
	}
	err := e.shipLoop(ctx)
	cancel(err)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// readKernel reads /dev/kmsg from the persisted position: after the last
// acknowledged seq in the same boot, from the start of the ring buffer after a
// reboot (so faults logged before the exporter started are shipped too).
func (e *Exporter) readKernel(ctx context.Context) error {
	opts := kmsg.Options{
		BootTime: e.cfg.BootTime,
		// A printk split into continuation records ('c') is one line of text:
		// ship it whole so a rule sees all of it.
		MergeContinuations: true,
		OnLoss: func(l kmsg.Loss) {
			e.m.dropped.WithLabelValues("overrun").Add(float64(l.Count))
			e.log.Warn("kernel records lost", "after_seq", l.After, "next_seq", l.Next, "count", l.Count, "overrun", l.Overrun)
		},
		OnMalformed: func(raw []byte, err error) {
			e.m.dropped.WithLabelValues("malformed").Inc()
			e.log.Warn("malformed kernel record skipped", "err", err)
		},
	}
	r, err := kmsg.Open(e.cfg.KmsgPath, opts)
	if err != nil {
		return err
	}
	defer r.Close()
	st := e.store.Get()
	if st.BootID == e.bootID && st.KmsgValid {
		if err := r.SeekAfter(st.KmsgSeq); err != nil {
			return err
		}
		e.log.Info("resuming kernel log", "boot_id", e.bootID, "after_seq", st.KmsgSeq)
	} else {
		e.log.Info("reading kernel log from the start of this boot", "boot_id", e.bootID, "previous_boot_id", st.BootID)
	}
	for {
		e.progress.Store(time.Now().UnixNano())
		// Wake up now and then on a quiet node, so a live reader keeps proving it
		// is alive and /healthz only fails for a reader that really hangs.
		nctx, done := context.WithTimeout(ctx, e.cfg.StallAfter/4)
		rec, err := r.Next(nctx)
		done()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			// A regular file (tests, replays): wait for it to grow.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(e.cfg.PollInterval):
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		e.m.read.WithLabelValues(ship.SourceKernel).Inc()
		if rec.Facility != kmsg.FacilityKern && !e.cfg.AllFacilities {
			continue
		}
		it := Item{Rec: ship.Record{
			Time: rec.Time, Body: rec.Message, Source: ship.SourceKernel, Node: e.cfg.Node,
			Seq: rec.Seq, BootID: e.bootID, Level: int(rec.Level), Facility: int(rec.Facility),
		}}
		if rec.LastSeq > rec.Seq {
			it.Rec.Seq = rec.LastSeq
		}
		if !e.enqueue(ctx, it) {
			return nil
		}
	}
}

// readPods tails pod log files; each line carries the position to save once it is
// acknowledged.
func (e *Exporter) readPods(ctx context.Context) error {
	return e.pods.RunFunc(ctx, func(ctx context.Context, en podlogs.Entry) error {
		e.m.read.WithLabelValues(ship.SourcePod).Inc()
		if en.Truncated {
			e.m.dropped.WithLabelValues("truncated").Inc()
		}
		it := Item{
			Rec: ship.Record{Time: en.Time, Body: en.Message, Source: ship.SourcePod, Node: e.cfg.Node,
				Namespace: en.Namespace, Pod: en.Pod, Container: en.Container, Stream: string(en.Stream)},
			Pod: &PodAck{Path: en.Path, Inode: en.Inode, Offset: en.Offset},
		}
		if !e.enqueue(ctx, it) {
			return ctx.Err()
		}
		return nil
	})
}

// enqueue blocks while the buffer is full: back-pressure, never unbounded growth.
func (e *Exporter) enqueue(ctx context.Context, it Item) bool {
	select {
	case e.buf <- it:
		return true
	default:
	}
	e.blocked.Store(true)
	defer e.blocked.Store(false)
	select {
	case e.buf <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// shipLoop batches buffered records and ships them in order; each acknowledged
// batch moves the persisted position forward.
func (e *Exporter) shipLoop(ctx context.Context) error {
	batch := make([]Item, 0, e.cfg.BatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		e.m.bufferFill.Set(float64(len(e.buf)))
		select {
		case <-ctx.Done():
			return e.flush(batch)
		case it := <-e.buf:
			if len(batch) == 0 {
				timer.Reset(e.cfg.BatchWait)
			}
			batch = append(batch, it)
			// Drain what is already waiting, without blocking.
			for len(batch) < e.cfg.BatchSize {
				select {
				case it := <-e.buf:
					batch = append(batch, it)
					continue
				default:
				}
				break
			}
			if len(batch) < e.cfg.BatchSize {
				continue
			}
		case <-timer.C:
		}
		timer.Stop()
		if len(batch) == 0 {
			continue
		}
		if err := e.ship(ctx, batch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		batch = batch[:0]
	}
}

func (e *Exporter) ship(ctx context.Context, batch []Item) error {
	recs := make([]ship.Record, len(batch))
	for i, it := range batch {
		recs[i] = it.Rec
	}
	start := time.Now()
	err := ship.Retry(ctx, e.cfg.Sender, recs, e.cfg.Backoff, func(attempt int, err error, wait time.Duration) {
		e.m.retries.Inc()
		e.log.Warn("send failed, retrying", "sender", e.cfg.Sender.Name(), "attempt", attempt, "wait", wait, "err", err)
	})
	e.m.batchLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The receiver refused the batch for good (a 4xx other than 429): it
		// can never be shipped. Count it, say so, and move on rather than
		// block the node's log forever.
		e.m.failed.Add(float64(len(batch)))
		e.log.Error("batch refused by the receiver, dropped", "records", len(batch), "err", err)
	} else {
		for _, it := range batch {
			e.m.shipped.WithLabelValues(it.Rec.Source).Inc()
		}
	}
	return e.commit(batch)
}

// flush ships what was read before shutdown, within ShutdownGrace.
func (e *Exporter) flush(batch []Item) error {
	for {
		select {
		case it := <-e.buf:
			batch = append(batch, it)
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownGrace)
	defer cancel()
	for len(batch) > 0 {
		n := min(len(batch), e.cfg.BatchSize)
		if err := e.ship(ctx, batch[:n]); err != nil {
			e.log.Warn("shutdown: unshipped records stay unacknowledged and are read again at start", "records", len(batch), "err", err)
			return nil
		}
		batch = batch[n:]
	}
	return nil
}

// commit persists the positions of a shipped (or definitively refused) batch.
func (e *Exporter) commit(batch []Item) error {
	var lastSeq uint64
	haveSeq := false
	var pods []PodAck
	for _, it := range batch {
		if it.Pod != nil {
			pods = append(pods, *it.Pod)
			continue
		}
		if it.Rec.Source == ship.SourceKernel {
			lastSeq, haveSeq = it.Rec.Seq, true
		}
	}
	err := e.store.Update(func(f *state.File) {
		if haveSeq {
			f.BootID, f.KmsgSeq, f.KmsgValid = e.bootID, lastSeq, true
		} else if f.BootID != e.bootID {
			f.BootID, f.KmsgSeq, f.KmsgValid = e.bootID, 0, false
		}
		f.BootTime = e.cfg.BootTime
		for _, p := range pods {
			f.Pods[p.Path] = state.PodPos{Inode: p.Inode, Offset: p.Offset}
		}
		if e.pods != nil && len(pods) > 0 {
			e.pods.Prune(f.Pods) // forget pods that are gone
		}
	})
	if err != nil {
		return fmt.Errorf("commit position: %w", err)
	}
	if haveSeq {
		e.m.lastSeq.Set(float64(lastSeq))
	}
	return nil
}

// Healthy reports an error when the kernel reader died or stalled while the buffer
// had room; a reader held back by a full buffer (receiver down) is healthy.
func (e *Exporter) Healthy() error {
	if v := e.readErr.Load(); v != nil {
		return fmt.Errorf("kernel reader stopped: %v", v)
	}
	if e.blocked.Load() {
		return nil
	}
	last := time.Unix(0, e.progress.Load())
	if d := time.Since(last); d > e.cfg.StallAfter {
		return fmt.Errorf("kernel reader made no progress for %s", d.Round(time.Second))
	}
	return nil
}

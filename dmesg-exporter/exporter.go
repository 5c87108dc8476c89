// Package exporter is the dmesg-exporter: it reads a GPU node's kernel log
// (/dev/kmsg) and its training pods' log files, and ships every line to an
// OpenTelemetry Collector (OTLP/HTTP) or straight to Loki, none lost and none
// replayed: the read position is persisted only after the receiver acknowledged.
//
// Stages, each one job: sources (the table's rows with an exporter lane:
// kernel, pods) → one lane per source: a buffer
// bounded in records and bytes (back-pressure instead of unbounded growth) →
// batcher → sender with retries, splits and refusals → position commit. The
// lanes are independent, so pod lines never hold kernel lines back.
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
	"github.com/faultline-dev/faultline/logstream"
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

	BatchSize int // records per batch (default 500)
	// BatchBytes bounds a batch's encoded size before compression (default
	// DefaultBatchBytes); a single larger record is sent alone.
	BatchBytes int
	BatchWait  time.Duration // longest a record waits for its batch to fill (default 1s)
	BufferSize int           // records buffered per source between reader and sender (default 10000)
	// BufferBytes bounds, per source, the bytes of records read and not yet
	// acknowledged (buffer and batch in flight; default DefaultBufferBytes).
	BufferBytes  int
	PollInterval time.Duration // how often a regular file at EOF is checked for growth (default 200ms)
	// StallAfter: /healthz fails when a reader has made no progress for this long
	// while the buffer had room (default 2m).
	StallAfter time.Duration
	// MaxAge drops records older than this when they are read, counted as
	// dropped{reason="too_old"} (0: none). Loki refuses entries older than its
	// reject_old_samples_max_age (a week by default) with a 400, for good; since a
	// refused batch is retried rather than dropped, such a record would hold its
	// source forever (the ring buffer of a node up for weeks holds them).
	MaxAge time.Duration
	// ShutdownGrace is how long, after ctx is done, the exporter keeps trying to
	// ship what it already read, so a rolling restart loses nothing (default 10s).
	ShutdownGrace time.Duration

	// PodLogs, when set, tails pod log files too (its Start positions come from
	// the state file).
	PodLogs *podlogs.Config

	Metrics *Metrics
	Log     *slog.Logger
}

// Defaults of Config's byte bounds. A batch of 1 MiB fits the collector's OTLP
// receiver (max_request_body_size, 20 MiB by default) and Loki's request limits
// (the 4 MiB gRPC message limit between distributor and ingester,
// grpc_server_max_recv_msg_size) with room to spare; two lanes of 8 MiB keep the
// exporter far below the chart's 128 MiB memory limit, whatever the line sizes.
const (
	DefaultBatchBytes  = 1 << 20
	DefaultBufferBytes = 8 << 20
)

// Exporter ships one node's logs.
type Exporter struct {
	cfg      Config
	store    *state.Store
	bootID   string
	log      *slog.Logger
	m        *Metrics
	progress atomic.Int64 // unix nanos of the kernel reader's last progress
	readErr  atomic.Value // error that stopped the kernel reader
	pods     *podlogs.Tailer
	// sources are the ones this exporter reads, each with its lane, in the order of
	// the table of sources (logstream.Sources).
	sources []*source
}

// source is one source the exporter reads: its reader and the lane that ships its
// records.
type source struct {
	name string
	lane *lane
	read func(context.Context, *lane) error
}

// reader is how the exporter reads one source of the table: read queues its records
// on the lane until ctx is done; commit persists the read position after a batch the
// receiver acknowledged (resumable sources).
type reader struct {
	read   func(context.Context, *lane) error
	commit func([]Item) error
}

// readerOf returns the reader of a source the exporter ships, or false when the
// source is not configured on this node (pod logs without PodLogs).
func (e *Exporter) readerOf(name string) (reader, bool, error) {
	switch name {
	case logstream.SourceKernel:
		return reader{read: e.readKernel, commit: e.commitKernel}, true, nil
	case logstream.SourcePod:
		return reader{read: e.readPods, commit: e.commitPods}, e.pods != nil, nil
	}
	return reader{}, false, fmt.Errorf("exporter: source %q ships on lane %q, and the exporter has no reader for it", name, name)
}

// noCommit is the commit of a source without a read position.
func noCommit([]Item) error { return nil }

// New checks the configuration, opens the state file and reads the boot id.
func New(cfg Config) (*Exporter, error) {
	if cfg.Node == "" {
		return nil, errors.New("exporter: node name is required")
	}
	if cfg.KmsgPath == "" {
		cfg.KmsgPath = kmsg.DefaultDevice
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = 2 * time.Minute
	}
	if err := cfg.shippingDefaults(); err != nil {
		return nil, err
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
	e := &Exporter{cfg: cfg, store: st, bootID: bootID, log: cfg.Log, m: cfg.Metrics}
	if cfg.PodLogs != nil {
		pc := *cfg.PodLogs
		pc.Start = st.Get().Pods
		if pc.Log == nil {
			pc.Log = cfg.Log
		}
		if e.pods, err = podlogs.New(pc); err != nil {
			return nil, fmt.Errorf("exporter: pod logs: %w", err)
		}
		e.m.pods.Store(e.pods)
	}
	for _, src := range logstream.Sources() {
		if src.Lane == logstream.LaneNone {
			continue
		}
		r, ok, err := e.readerOf(src.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if !src.Resumable {
			r.commit = noCommit
		}
		e.sources = append(e.sources, &source{name: src.Name, lane: newLane(string(src.Lane), &e.cfg, e.m, e.log, r.commit), read: r.read})
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
	for _, s := range e.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.read(ctx, s.lane); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s reader: %w", s.name, err))
			}
		}()
	}
	// Each lane ships until ctx is done, then what its reader had read.
	errs := make(chan error, len(e.sources))
	for _, s := range e.sources {
		go func() {
			err := s.lane.run(ctx)
			if err != nil {
				cancel(fmt.Errorf("%s lane: %w", s.lane.source, err))
			}
			errs <- err
		}()
	}
	wg.Wait()
	for range e.sources {
		<-errs
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// readKernel reads /dev/kmsg from the persisted position: after the last
// acknowledged seq in the same boot, from the start of the ring buffer after a
// reboot (so faults logged before the exporter started are shipped too). An error
// that stops it is kept for Alive.
func (e *Exporter) readKernel(ctx context.Context, l *lane) error {
	err := e.followKernel(ctx, l)
	if err != nil && ctx.Err() == nil {
		e.readErr.Store(err)
	}
	return err
}

func (e *Exporter) followKernel(ctx context.Context, l *lane) error {
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
		if rec.Facility != kmsg.FacilityKern && !e.cfg.AllFacilities || e.tooOld(rec.Time) {
			continue
		}
		it := Item{Rec: ship.Record{
			Time: rec.Time, Body: rec.Message, Source: ship.SourceKernel, Node: e.cfg.Node,
			Seq: rec.Seq, BootID: e.bootID, Level: int(rec.Level), Facility: int(rec.Facility),
		}}
		if rec.LastSeq > rec.Seq {
			it.Rec.Seq = rec.LastSeq
		}
		if !l.enqueue(ctx, it) {
			return nil
		}
	}
}

// readPods tails pod log files; each line carries the position to save once it is
// acknowledged.
func (e *Exporter) readPods(ctx context.Context, l *lane) error {
	return e.pods.RunFunc(ctx, func(ctx context.Context, en podlogs.Entry) error {
		e.m.read.WithLabelValues(ship.SourcePod).Inc()
		if en.Truncated {
			e.m.dropped.WithLabelValues("truncated").Inc()
		}
		if e.tooOld(en.Time) {
			return nil
		}
		it := Item{
			Rec: ship.Record{Time: en.Time, Body: en.Message, Source: ship.SourcePod, Node: e.cfg.Node,
				Namespace: en.Namespace, Pod: en.Pod, Container: en.Container, Stream: string(en.Stream)},
			PodPath: en.Path, PodPos: en.Pos,
		}
		if !l.enqueue(ctx, it) {
			return ctx.Err()
		}
		return nil
	})
}

// tooOld reports, and counts, a record older than MaxAge.
func (e *Exporter) tooOld(t time.Time) bool {
	if e.cfg.MaxAge <= 0 || t.IsZero() || time.Since(t) <= e.cfg.MaxAge {
		return false
	}
	e.m.dropped.WithLabelValues("too_old").Inc()
	return true
}

// commitKernel persists the kernel position after an acknowledged batch.
func (e *Exporter) commitKernel(batch []Item) error {
	last := batch[len(batch)-1].Rec.Seq
	err := e.store.Update(func(f *state.File) {
		f.BootID, f.KmsgSeq, f.KmsgValid = e.bootID, last, true
		f.BootTime = e.cfg.BootTime
	})
	if err != nil {
		return fmt.Errorf("commit kernel position: %w", err)
	}
	e.m.lastSeq.Set(float64(last))
	return nil
}

// commitPods persists the pod file positions after an acknowledged batch.
func (e *Exporter) commitPods(batch []Item) error {
	err := e.store.Update(func(f *state.File) {
		for _, it := range batch {
			f.Pods[it.PodPath] = it.PodPos
		}
		e.pods.Prune(f.Pods) // forget pods that are gone
	})
	if err != nil {
		return fmt.Errorf("commit pod positions: %w", err)
	}
	return nil
}

// Healthy reports an error when the exporter is not Alive, or while the receiver
// refuses a source's records (they wait, unshipped, until it accepts them).
func (e *Exporter) Healthy() error {
	if err := e.Alive(); err != nil {
		return err
	}
	for _, s := range e.sources {
		if err := s.lane.healthy(); err != nil {
			return err
		}
	}
	return nil
}

// Alive reports an error when the kernel reader died or stalled while its buffer
// had room; a reader held back by a full buffer (receiver down or refusing) is
// alive.
func (e *Exporter) Alive() error {
	if v := e.readErr.Load(); v != nil {
		return fmt.Errorf("kernel reader stopped: %v", v)
	}
	if e.lane(logstream.SourceKernel).blocked.Load() {
		return nil
	}
	last := time.Unix(0, e.progress.Load())
	if d := time.Since(last); d > e.cfg.StallAfter {
		return fmt.Errorf("kernel reader made no progress for %s", d.Round(time.Second))
	}
	return nil
}

// lane returns the lane of the source named name; nil when it is not read here.
func (e *Exporter) lane(name string) *lane {
	for _, s := range e.sources {
		if s.name == name {
			return s.lane
		}
	}
	return nil
}

// shippingDefaults checks and completes what the lanes use: the sender, batch and
// buffer bounds, the shutdown grace, the log and the metrics.
func (cfg *Config) shippingDefaults() error {
	if cfg.Sender == nil {
		return errors.New("exporter: a sender (OTLP endpoint or Loki URL) is required")
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
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = max(DefaultBufferBytes, 2*cfg.BatchBytes)
	}
	if cfg.BufferBytes < cfg.BatchBytes {
		return fmt.Errorf("exporter: buffer bytes (%d) below batch bytes (%d): no batch could fill", cfg.BufferBytes, cfg.BatchBytes)
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
	return nil
}

package exporter

import (
	"context"
	"fmt"

	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/logstream"
)

// Lane carries the records of one source that another program produces — the probe
// agent's NVML events — through the exporter's own shipping path: the same bounded
// buffer, batches, retries, splits, refusal handling, metrics (labelled with the
// source) and health, so a line reaches the receiver exactly as a kernel line does.
// Its records have no read position: one the receiver never acknowledged is lost
// only when the process stops past its shutdown grace, and that is logged.
type Lane struct {
	l *lane
}

// NewLane returns the lane of source, shipping with cfg's Sender, Backoff, batch and
// buffer bounds, ShutdownGrace, Metrics and Log; the fields of the kernel and pod
// readers are not used. The source is one of the table's that another program ships
// (logstream.LaneNone): a source on an exporter lane has its reader there.
func NewLane(source string, cfg Config) (*Lane, error) {
	if s, ok := logstream.LookupSource(source); !ok || s.Lane != logstream.LaneNone {
		return nil, fmt.Errorf("exporter: %q is not a log source shipped outside the exporter", source)
	}
	if err := cfg.shippingDefaults(); err != nil {
		return nil, err
	}
	c := &cfg
	return &Lane{l: newLane(source, c, c.Metrics, c.Log, func([]Item) error { return nil })}, nil
}

// Ship queues one record, waiting while the lane holds its limit of records or
// bytes (back-pressure: nothing is dropped); it returns false when ctx ended first.
func (l *Lane) Ship(ctx context.Context, rec ship.Record) bool {
	if rec.Source == "" {
		rec.Source = l.l.source
	}
	l.l.m.read.WithLabelValues(l.l.source).Inc()
	return l.l.enqueue(ctx, Item{Rec: rec})
}

// Run ships the queued records until ctx is done, then what is left within the
// shutdown grace.
func (l *Lane) Run(ctx context.Context) error { return l.l.run(ctx) }

// Healthy fails while the receiver refuses this lane's records.
func (l *Lane) Healthy() error { return l.l.healthy() }

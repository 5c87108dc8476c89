package nvmlevents

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Config configures a Watcher.
type Config struct {
	// Ship sends one line on; it waits while the shipping path is full and returns
	// false when ctx ended first.
	Ship func(ctx context.Context, l Line) bool
	// Wait bounds one wait for events (default 2s): how late the watcher notices
	// that ctx ended.
	Wait time.Duration
	// LostRetry is the pause after NVML answered that a GPU is lost, or failed,
	// before waiting again (default 10s), so a GPU gone for good costs no busy loop.
	LostRetry time.Duration
	// ClockInterval is the least time between two clock-change lines of a GPU
	// (default 1m); the changes in between are counted, not shipped.
	ClockInterval time.Duration
	Metrics       *Metrics
	Log           *slog.Logger
	// Now stamps the lines (default time.Now).
	Now func() time.Time
}

func (c *Config) defaults() error {
	if c.Ship == nil {
		return errors.New("nvml events: a Ship function is required")
	}
	if c.Wait <= 0 {
		c.Wait = 2 * time.Second
	}
	if c.LostRetry <= 0 {
		c.LostRetry = 10 * time.Second
	}
	if c.ClockInterval <= 0 {
		c.ClockInterval = time.Minute
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// ErrNoNVML is returned by Run where NVML cannot be used: no NVIDIA library on the
// node, or a binary built without cgo.
var ErrNoNVML = errors.New("nvml events: NVML is not available")

// ErrNothingToWatch is returned by Run when no GPU supports any watched event type.
var ErrNothingToWatch = errors.New("nvml events: no GPU supports a watched event type")

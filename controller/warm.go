package controller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/logstream"
)

// warmMaxLines bounds the lines a warm-up holds; past it the warm-up is given up
// (logged, counted), not the pipeline.
const warmMaxLines = 200_000

// warmUp feeds the lines the previous term read within the rules' horizon to the
// match stage alone (lokisource.Source.Warm): a threshold window or a multi-line
// group that spans the read position needs them (the third link-down after a
// fail-over completes the flap the two before it began). Their firings are dropped:
// they were acted on when the lines were first read. A failure costs only the
// windows, so it is logged and counted, never fatal.
func warmUp(ctx context.Context, src *lokisource.Source, from lokisource.Checkpoint, horizon time.Duration,
	process func(logstream.Line), lines *prometheus.CounterVec, log *slog.Logger) {
	if horizon <= 0 {
		return
	}
	t0 := time.Now()
	n := 0
	err := src.Warm(ctx, from, horizon, warmMaxLines, func(l logstream.Line) error {
		n++
		process(l)
		return nil
	})
	result := "ok"
	switch {
	case err != nil && ctx.Err() != nil:
		return
	case errors.Is(err, lokisource.ErrTooManyLines):
		result = "too_many_lines"
		log.Warn("warm-up given up: windows that span the read position start empty", "horizon", horizon, "err", err)
	case err != nil:
		result = "error"
		log.Warn("warm-up failed: windows that span the read position start empty", "horizon", horizon, "err", err)
	default:
		log.Info("warmed the rules' windows with the lines read before the position", "horizon", horizon, "lines", n, "took", time.Since(t0).Round(time.Millisecond))
	}
	lines.WithLabelValues(result).Add(float64(n))
}

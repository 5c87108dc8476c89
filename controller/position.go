package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/controller/lokisource"
)

func (c *Controller) loadPosition(ctx context.Context) (lokisource.Checkpoint, error) {
	raw, err := c.store.LoadState(ctx)
	if err != nil {
		return lokisource.Checkpoint{}, err
	}
	if raw == nil {
		start := time.Now().Add(-c.cfg.InitialLookback)
		c.log.Info("no saved position: starting from the lookback", "start", start)
		return lokisource.StartAt(start), nil
	}
	var cp lokisource.Checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		return lokisource.Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	c.log.Info("resuming from the saved position", "position", cp.Min())
	return cp, nil
}

func (c *Controller) saveLoop(ctx context.Context, src *lokisource.Source) {
	t := time.NewTicker(c.cfg.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.savePosition(ctx, src)
		}
	}
}

func (c *Controller) savePosition(ctx context.Context, src *lokisource.Source) {
	cp := src.Checkpoint()
	raw, err := json.Marshal(cp)
	if err != nil {
		c.log.Error("checkpoint", "err", err)
		return
	}
	if err := c.store.SaveState(ctx, raw, cp.Min()); err != nil {
		c.log.Warn("checkpoint not saved, will retry", "err", err)
		c.m.checkpointErrors.Inc()
	}
}

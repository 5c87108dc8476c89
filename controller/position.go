package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/lokisource"
)

func (c *Controller) loadPosition(ctx context.Context) (lokisource.Checkpoint, error) {
	raw, storms, err := c.store.LoadState(ctx)
	if err != nil {
		return lokisource.Checkpoint{}, err
	}
	c.restoreStorms(storms)
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

// savePosition saves the read position with the storm hold's state: the next
// leader decides again the lines after the position, against the storms as they
// were when it was saved.
func (c *Controller) savePosition(ctx context.Context, src *lokisource.Source) {
	cp := src.Checkpoint()
	raw, err := json.Marshal(cp)
	if err != nil {
		c.log.Error("checkpoint", "err", err)
		return
	}
	storms, err := c.stormState()
	if err != nil {
		c.log.Error("checkpoint: storm state", "err", err)
		storms = nil
	}
	if err := c.store.SaveState(ctx, raw, cp.Min(), storms); err != nil {
		c.log.Warn("checkpoint not saved, will retry", "err", err)
		c.m.checkpointErrors.Inc()
	}
}

// restoreStorms takes over the storm state the previous leader saved: a storm that
// held faults still holds them, and an operator's release of it stands.
func (c *Controller) restoreStorms(raw []byte) {
	if raw == nil {
		return
	}
	var st decide.StormState
	if err := json.Unmarshal(raw, &st); err != nil {
		c.m.checkpointErrors.Inc()
		c.log.Warn("saved storm state unreadable; storms start over", "err", err)
		return
	}
	if active := c.decider.RestoreStorms(st); len(active) > 0 {
		c.log.Info("storms resumed from the previous leader", "rules", active)
	}
}

// maxStormBytes bounds the storm state saved beside the position: the ConfigMap holds
// at most 1 MiB, and the position must always fit.
const maxStormBytes = 256 << 10

// stormState encodes the storm hold's state for the checkpoint, within
// maxStormBytes (see decide.StormState.Encode).
func (c *Controller) stormState() ([]byte, error) {
	raw, trimmed, err := c.decider.StormState().Encode(maxStormBytes)
	if trimmed {
		c.log.Warn("storm state too large to save whole: saving the storms without their nodes", "limit", maxStormBytes)
	}
	return raw, err
}

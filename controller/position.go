package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/controller/actqueue"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/lokisource"
)

func (c *Controller) loadPosition(ctx context.Context) (cp lokisource.Checkpoint, saved bool, err error) {
	raw, storms, err := c.store.LoadState(ctx)
	if err != nil {
		return lokisource.Checkpoint{}, false, err
	}
	c.restoreStorms(storms)
	if raw == nil {
		start := time.Now().Add(-c.cfg.InitialLookback)
		c.log.Info("no saved position: starting from the lookback", "start", start)
		return lokisource.StartAt(start), false, nil
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return lokisource.Checkpoint{}, false, fmt.Errorf("checkpoint: %w", err)
	}
	c.log.Info("resuming from the saved position", "position", cp.Min())
	return cp, true, nil
}

func (c *Controller) saveLoop(ctx context.Context, pos *positions) {
	t := time.NewTicker(c.cfg.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.savePosition(ctx, pos, false)
		}
	}
}

// position is a read position with the storm hold's state, taken when the lines up
// to mark had been read: saved once they are all carried out.
type position struct {
	cp     lokisource.Checkpoint
	storms []byte
	mark   uint64
}

// positions are a term's read positions: those taken and not yet saved, oldest
// first, and the last saved (at first, the one the term resumed from).
type positions struct {
	src *lokisource.Source
	q   *actqueue.Queue

	mu    sync.Mutex
	taken []position
	last  lokisource.Checkpoint
}

// maxPositions bounds the positions waiting for their lines' work: past it the
// newest is replaced, so a save waits at most for work queued since.
const maxPositions = 4

// savePosition takes the read position now, and saves the newest position taken
// whose lines are all carried out, with the storm hold's state as it was then: the
// next leader decides again the lines after it, against those storms. stormsNow
// saves the storm state of now instead (an operator released a storm or gave a
// fleet verdict: it must stand), with the last saved position when no newer one is
// carried out.
func (c *Controller) savePosition(ctx context.Context, pos *positions, stormsNow bool) {
	pos.mu.Lock()
	defer pos.mu.Unlock()
	// The position first, then the mark: every line the position covers was begun
	// before the mark was read.
	cp := pos.src.Checkpoint()
	storms, err := c.stormState()
	if err != nil {
		c.log.Error("checkpoint: storm state", "err", err)
		storms = nil
	}
	p := position{cp: cp, storms: storms, mark: pos.q.Mark()}
	if n := len(pos.taken); n == maxPositions {
		pos.taken[n-1] = p
	} else {
		pos.taken = append(pos.taken, p)
	}
	done := -1
	for i, p := range pos.taken {
		if pos.q.DoneThrough(p.mark) {
			done = i
		}
	}
	save := position{cp: pos.last}
	switch {
	case done >= 0:
		save = pos.taken[done]
		pos.taken = pos.taken[done+1:]
	case !stormsNow:
		return
	}
	if stormsNow {
		save.storms = storms
	}
	raw, err := json.Marshal(save.cp)
	if err != nil {
		c.log.Error("checkpoint", "err", err)
		return
	}
	if err := c.store.SaveState(ctx, raw, save.cp.Min(), save.storms); err != nil {
		c.log.Warn("checkpoint not saved, will retry", "err", err)
		c.m.checkpointErrors.Inc()
		return
	}
	pos.last = save.cp
}

// restoreStorms takes over the storm state the previous leader saved: a storm that
// held faults still holds them, and an operator's release of it stands.
func (c *Controller) restoreStorms(raw []byte) {
	if raw == nil {
		return
	}
	var st holdState
	if err := json.Unmarshal(raw, &st); err != nil {
		c.m.checkpointErrors.Inc()
		c.log.Warn("saved storm state unreadable; storms start over", "err", err)
		return
	}
	if active := c.decider.RestoreStorms(st.StormState); len(active) > 0 {
		c.log.Info("storms resumed from the previous leader", "rules", active)
	}
	if st.Fleet != nil {
		if pending := c.decider.RestoreFleet(*st.Fleet); len(pending) > 0 {
			c.log.Info("fleet faults resumed from the previous leader", "fleet", pending)
		}
	}
}

// holdState is what is saved beside the position: the storm hold's state and,
// under "fleet", fleet correlation's (decide.FleetState).
type holdState struct {
	decide.StormState
	Fleet *decide.FleetState `json:"fleet,omitempty"`
}

// maxStormBytes bounds the storm state saved beside the position, maxFleetBytes
// fleet correlation's: the ConfigMap holds at most 1 MiB, and the position must
// always fit.
const (
	maxStormBytes = 256 << 10
	maxFleetBytes = 256 << 10
)

// stormState encodes the storm hold's state for the checkpoint, within
// maxStormBytes (see decide.StormState.Encode), with fleet correlation's state
// within maxFleetBytes: over it, the firings of groups without a fleet fault are
// left out, then the fleet state altogether (the fleet faults' records stay).
func (c *Controller) stormState() ([]byte, error) {
	raw, trimmed, err := c.decider.StormState().Encode(maxStormBytes)
	if trimmed {
		c.log.Warn("storm state too large to save whole: saving the storms without their nodes", "limit", maxStormBytes)
	}
	if err != nil || len(c.cfg.Decide.Fleet.Labels) == 0 {
		return raw, err
	}
	fs := c.decider.FleetState()
	fleet, err := json.Marshal(fs)
	if err == nil && len(fleet) > maxFleetBytes {
		c.log.Warn("fleet state too large to save whole: saving the fleet faults only", "limit", maxFleetBytes)
		fleet, err = json.Marshal(fs.Trim())
	}
	if err != nil {
		return nil, fmt.Errorf("fleet state: %w", err)
	}
	if len(fleet) > maxFleetBytes {
		c.m.checkpointErrors.Inc()
		c.log.Error("fleet state too large to save: the next leader starts fleet correlation over", "limit", maxFleetBytes)
		return raw, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("storm state: %w", err)
	}
	all["fleet"] = fleet
	return json.Marshal(all)
}

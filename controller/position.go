package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline-dev/faultline/controller/actqueue"
	"github.com/faultline-dev/faultline/controller/checkpoint"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/lokisource"
)

// keeper saves and loads the read position with the decider's storm and fleet
// state, in the checkpoint ConfigMap.
type keeper struct {
	store    *checkpoint.Store
	decider  *decide.Decider
	fleet    bool // fleet correlation is on: its state is saved too
	lookback time.Duration
	every    time.Duration
	errors   prometheus.Counter
	log      *slog.Logger
}

// load reads the saved position (saved false: there is none, start from the
// lookback) and restores the storm and fleet state saved with it.
func (k *keeper) load(ctx context.Context) (cp lokisource.Checkpoint, saved bool, err error) {
	raw, storms, err := k.store.LoadState(ctx)
	if err != nil {
		return lokisource.Checkpoint{}, false, err
	}
	k.restore(storms)
	if raw == nil {
		start := time.Now().Add(-k.lookback)
		k.log.Info("no saved position: starting from the lookback", "start", start)
		return lokisource.StartAt(start), false, nil
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return lokisource.Checkpoint{}, false, fmt.Errorf("checkpoint: %w", err)
	}
	k.log.Info("resuming from the saved position", "position", cp.Min())
	return cp, true, nil
}

func (k *keeper) saveLoop(ctx context.Context, pos *positions) {
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.save(ctx, pos, false)
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

// save takes the read position now, and saves the newest position taken
// whose lines are all carried out, with the storm hold's state as it was then: the
// next leader decides again the lines after it, against those storms. stormsNow
// saves the storm state of now instead (an operator released a storm or gave a
// fleet verdict: it must stand), with the last saved position when no newer one is
// carried out.
func (k *keeper) save(ctx context.Context, pos *positions, stormsNow bool) {
	pos.mu.Lock()
	defer pos.mu.Unlock()
	// The position first, then the mark: every line the position covers was begun
	// before the mark was read.
	cp := pos.src.Checkpoint()
	storms, err := k.state()
	if err != nil {
		k.log.Error("checkpoint: storm state", "err", err)
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
		k.log.Error("checkpoint", "err", err)
		return
	}
	if err := k.store.SaveState(ctx, raw, save.cp.Min(), save.storms); err != nil {
		k.log.Warn("checkpoint not saved, will retry", "err", err)
		k.errors.Inc()
		return
	}
	pos.last = save.cp
}

// restore takes over the storm state the previous leader saved: a storm that
// held faults still holds them, and an operator's release of it stands.
func (k *keeper) restore(raw []byte) {
	if raw == nil {
		return
	}
	var st holdState
	if err := json.Unmarshal(raw, &st); err != nil {
		k.errors.Inc()
		k.log.Warn("saved storm state unreadable; storms start over", "err", err)
		return
	}
	if active := k.decider.Storms().Restore(st.StormState); len(active) > 0 {
		k.log.Info("storms resumed from the previous leader", "rules", active)
	}
	if st.Fleet != nil {
		if pending := k.decider.Fleet().Restore(*st.Fleet); len(pending) > 0 {
			k.log.Info("fleet faults resumed from the previous leader", "fleet", pending)
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

// state encodes the storm hold's state for the checkpoint, within
// maxStormBytes (see decide.StormState.Encode), with fleet correlation's state
// within maxFleetBytes: over it, the firings of groups without a fleet fault are
// left out, then the fleet state altogether (the fleet faults' records stay).
func (k *keeper) state() ([]byte, error) {
	raw, trimmed, err := k.decider.Storms().State().Encode(maxStormBytes)
	if trimmed {
		k.log.Warn("storm state too large to save whole: saving the storms without their nodes", "limit", maxStormBytes)
	}
	if err != nil || !k.fleet {
		return raw, err
	}
	fs := k.decider.Fleet().State()
	fleet, err := json.Marshal(fs)
	if err == nil && len(fleet) > maxFleetBytes {
		k.log.Warn("fleet state too large to save whole: saving the fleet faults only", "limit", maxFleetBytes)
		fleet, err = json.Marshal(fs.Trim())
	}
	if err != nil {
		return nil, fmt.Errorf("fleet state: %w", err)
	}
	if len(fleet) > maxFleetBytes {
		k.errors.Inc()
		k.log.Error("fleet state too large to save: the next leader starts fleet correlation over", "limit", maxFleetBytes)
		return raw, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("storm state: %w", err)
	}
	all["fleet"] = fleet
	return json.Marshal(all)
}

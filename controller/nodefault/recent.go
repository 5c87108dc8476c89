package nodefault

import (
	"sync"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// maxRecent bounds the faults remembered; past it the memory starts over (the
// oldest writes are long done, and forgetting one costs one write more).
const maxRecent = 100000

// recent remembers, per fault (by its key), the phase last written to its record
// and when, and when its evidence was last refreshed on an already-tainted node: a
// burst of one fault is then a write every Options.Refresh, not a write per line.
type recent struct {
	mu        sync.Mutex
	phases    map[string]phaseAt
	refreshed map[string]time.Time
}

type phaseAt struct {
	phase v1alpha1.Phase
	at    time.Time
}

// Due says whether the record of fault key may be written in phase now (a new
// phase, or the same one after Options.Refresh), and notes it as written.
func (s *Store) Due(key string, phase v1alpha1.Phase) bool {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	now := s.opts.Now()
	if last, ok := r.phases[key]; ok && last.phase == phase && now.Sub(last.at) < s.opts.Refresh {
		return false
	}
	if r.phases == nil || len(r.phases) > maxRecent {
		r.phases = map[string]phaseAt{}
	}
	r.phases[key] = phaseAt{phase: phase, at: now}
	return true
}

// Noted notes phase as written for fault key (a write made without asking Due).
func (s *Store) Noted(key string, phase v1alpha1.Phase) {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phases == nil || len(r.phases) > maxRecent {
		r.phases = map[string]phaseAt{}
	}
	r.phases[key] = phaseAt{phase: phase, at: s.opts.Now()}
}

// Undue forgets what was noted for fault key (the write failed, or the fault was
// resolved), so the next decision on it writes it.
func (s *Store) Undue(key string) {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.phases, key)
}

// RefreshDue says whether the evidence of fault key, whose node carries its taint
// already, may be written now (once every Options.Refresh), and notes the write.
func (s *Store) RefreshDue(key string) bool {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	now := s.opts.Now()
	if last, ok := r.refreshed[key]; ok && now.Sub(last) < s.opts.Refresh {
		return false
	}
	if r.refreshed == nil || len(r.refreshed) > maxRecent {
		r.refreshed = map[string]time.Time{}
	}
	r.refreshed[key] = now
	return true
}

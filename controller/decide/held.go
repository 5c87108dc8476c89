package decide

import (
	"slices"
	"time"

	"github.com/faultline-dev/faultline/controller/fault"
)

// HeldFault is a fault waiting in the held queue.
type HeldFault struct {
	// Fault carries the latest evidence of the fault.
	Fault  fault.Fault
	Reason HoldReason
	// Message explains the hold (as of the last decision or Release on it).
	Message string
	// Since is when the fault was first held; Updated when it last fired again.
	Since   time.Time
	Updated time.Time
	// Hits counts the firings folded into this entry.
	Hits int
	// ProbeFailed: a probe already confirmed the fault; its release taints at once.
	ProbeFailed bool
}

type heldEntry struct {
	key         string
	fault       fault.Fault
	reason      HoldReason
	message     string
	since       time.Time
	updated     time.Time
	hits        int
	probeFailed bool
}

// heldQueue keeps held faults in the order they were first held, deduplicated by
// fault key.
type heldQueue struct {
	entries []*heldEntry
	byKey   map[string]*heldEntry
}

func (q *heldQueue) get(key string) *heldEntry { return q.byKey[key] }

func (q *heldQueue) remove(key string) *heldEntry {
	e := q.byKey[key]
	if e == nil {
		return nil
	}
	delete(q.byKey, key)
	q.entries = slices.DeleteFunc(q.entries, func(x *heldEntry) bool { return x == e })
	return e
}

// hold records a held decision: a new entry at the tail, or the existing entry of
// the same key updated in place (latest evidence and reason, first-held time kept).
func (q *heldQueue) hold(dec Decision, probeFailed bool, now time.Time, maxHeld int, st *counters) {
	key := dec.Fault.Key()
	if e := q.get(key); e != nil {
		e.fault, e.reason, e.message, e.updated = dec.Fault, dec.Reason, dec.Message, now
		e.hits++
		e.probeFailed = e.probeFailed || probeFailed
		return
	}
	if len(q.entries) >= maxHeld {
		q.evict(st)
	}
	e := &heldEntry{key: key, fault: dec.Fault, reason: dec.Reason, message: dec.Message,
		since: now, updated: now, hits: 1, probeFailed: probeFailed}
	q.entries = append(q.entries, e)
	q.byKey[key] = e
}

// evict removes the least actionable entry: the oldest opted-out one, else the
// oldest storm-held one (most likely a rule bug), else the oldest.
func (q *heldQueue) evict(st *counters) {
	victim := q.entries[0]
	for _, r := range []HoldReason{ReasonOptedOut, ReasonStorm} {
		if i := slices.IndexFunc(q.entries, func(e *heldEntry) bool { return e.reason == r }); i >= 0 {
			victim = q.entries[i]
			break
		}
	}
	q.remove(victim.key)
	st.heldEvicted++
	st.evictedBy[victim.reason]++
}

// expire drops entries first held more than HeldTTL ago.
func (q *heldQueue) expire(now time.Time, ttl time.Duration, st *counters) {
	if ttl <= 0 {
		return
	}
	for _, e := range slices.Clone(q.entries) {
		if now.Sub(e.since) >= ttl {
			q.remove(e.key)
			st.heldExpired++
		}
	}
}

// Held returns the held faults, oldest first.
func (d *Decider) Held() []HeldFault {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held.expire(d.now(), d.cfg.HeldTTL, &d.st)
	out := make([]HeldFault, 0, len(d.held.entries))
	for _, e := range d.held.entries {
		out = append(out, HeldFault{Fault: e.fault, Reason: e.reason, Message: e.message,
			Since: e.since, Updated: e.updated, Hits: e.hits, ProbeFailed: e.probeFailed})
	}
	return out
}

// Forget removes the held fault with key fault.Key() (for example when its node was
// deleted, or an operator dismissed it) and reports whether there was one.
func (d *Decider) Forget(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held.remove(key) == nil {
		return false
	}
	d.st.heldForgotten++
	return true
}

// Restore puts a fault held by a previous leader back into the held queue, with the
// time it was first held, so a leader change neither loses nor re-orders held
// faults. A fault already held is left as it is.
func (d *Decider) Restore(h HeldFault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := h.Fault.Key()
	if d.held.get(key) != nil {
		return
	}
	if len(d.held.entries) >= d.cfg.MaxHeld {
		d.held.evict(&d.st)
	}
	e := &heldEntry{key: key, fault: h.Fault, reason: h.Reason, message: h.Message,
		since: h.Since, updated: h.Updated, hits: max(h.Hits, 1), probeFailed: h.ProbeFailed}
	// Keep the queue in first-held order: releases go oldest first.
	i := slices.IndexFunc(d.held.entries, func(x *heldEntry) bool { return x.since.After(e.since) })
	if i < 0 {
		i = len(d.held.entries)
	}
	d.held.entries = slices.Insert(d.held.entries, i, e)
	d.held.byKey[key] = e
}

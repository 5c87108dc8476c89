package lokisource

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// Checkpoint is a Source's read position, to persist (it marshals to JSON) and to
// pass to Run after a restart. Resuming from it emits neither a duplicate nor a gap
// for the lines Loki had when the checkpoint was taken.
type Checkpoint struct {
	// Start is where a query without a position of its own begins: on the first run,
	// or for a query added since. Checkpoint() sets it to the oldest position, the
	// overall checkpoint. The zero time means "now".
	Start time.Time `json:"start"`
	// Queries holds each query's position, by query name.
	Queries map[string]Position `json:"queries,omitempty"`
}

// Position is one query's read position.
type Position struct {
	// Time is the timestamp of the newest entry emitted (clamped to the wall clock
	// when emitted, so a node whose clock runs ahead cannot move it into the future).
	Time time.Time `json:"time"`
	// Since: Keys lists every entry emitted with a timestamp at or after Since. A
	// resumed query re-reads from Since and skips the listed entries, so lines that
	// reached Loki late (with older timestamps than lines already read) are not lost.
	Since time.Time `json:"since"`
	// Keys identify entries (a hash of stream, node, timestamp and line).
	Keys []string `json:"keys,omitempty"`
}

// StartAt returns a checkpoint that starts every query at t.
func StartAt(t time.Time) Checkpoint { return Checkpoint{Start: t} }

// Min returns the oldest position's Time (Start if there is none): the overall
// checkpoint, older than every line some query has yet to emit.
func (c Checkpoint) Min() time.Time {
	var m time.Time
	for _, p := range c.Queries {
		if m.IsZero() || p.Time.Before(m) {
			m = p.Time
		}
	}
	if m.IsZero() {
		return c.Start
	}
	return m
}

// key identifies an entry: a 128-bit hash of its stream, timestamp and line, and
// of its node where the node is structured metadata rather than a stream label
// (one stream then carries many nodes, and two of them can log the same line at
// the same nanosecond). An entry whose node is a stream label keeps the key it
// had before nodes could be metadata, so a checkpoint written then still matches.
type key [16]byte

func entryKey(stream, metaNode string, ts int64, line string) key {
	h := sha256.New()
	h.Write([]byte(stream))
	if metaNode != "" {
		// A canonical stream ends in "}" and escapes control bytes, so "\x01"
		// cannot be part of it.
		h.Write([]byte{1})
		h.Write([]byte(metaNode))
	}
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], uint64(ts))
	h.Write(b[:]) // b[0] = 0 separates the stream from the timestamp
	h.Write([]byte(line))
	var k key
	copy(k[:], h.Sum(nil))
	return k
}

func (k key) String() string { return hex.EncodeToString(k[:]) }

func parseKey(s string) (key, error) {
	var k key
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(k) {
		return k, fmt.Errorf("bad entry key %q", s)
	}
	copy(k[:], b)
	return k, nil
}

// window remembers the entries a query emitted, by key, for deduplication. It knows
// every emitted entry with a timestamp at or after floor; floor trails the newest
// timestamp by span. Timestamps are Unix nanoseconds.
type window struct {
	keys    map[key]int64 // key -> timestamp
	floor   int64
	maxTs   int64 // newest timestamp emitted, clamped to the wall clock
	span    int64
	maxKeys int

	inserts, pruneAt int
}

func newWindow(start int64, span time.Duration, maxKeys int) *window {
	return &window{keys: map[key]int64{}, floor: start, maxTs: start, span: int64(span), maxKeys: maxKeys, pruneAt: 1024}
}

// restoreWindow rebuilds a window from a position. The keys' timestamps are unknown:
// taking p.Time keeps each key until no re-read can return its entry any more.
func restoreWindow(p Position, span time.Duration, maxKeys int) (*window, error) {
	w := newWindow(p.Time.UnixNano(), span, maxKeys)
	w.floor = p.Since.UnixNano()
	for _, s := range p.Keys {
		k, err := parseKey(s)
		if err != nil {
			return nil, err
		}
		w.keys[k] = w.maxTs
	}
	return w, nil
}

func (w *window) seen(k key) bool {
	_, ok := w.keys[k]
	return ok
}

// add records an emitted entry; now (wall clock, ns) bounds how far the entry can
// move the window.
func (w *window) add(k key, ts, now int64) {
	w.keys[k] = ts
	if t := min(ts, now); t > w.maxTs {
		w.maxTs = t
		if f := t - w.span; f > w.floor {
			w.floor = f
		}
	}
	w.inserts++
	if w.inserts >= w.pruneAt || len(w.keys) > w.maxKeys {
		w.prune()
	}
}

// countBuckets counts the keys remembered in n buckets of step after start (Unix
// ns), as Source.countBuckets counts Loki's entries: bucket i holds those with a
// timestamp in (start+i*step, start+(i+1)*step].
func (w *window) countBuckets(start int64, step time.Duration, n int) []int64 {
	counts := make([]int64, n)
	end := start + int64(n)*int64(step)
	for _, ts := range w.keys {
		if ts > start && ts <= end {
			counts[(ts-start-1)/int64(step)]++
		}
	}
	return counts
}

// prune forgets the keys older than floor and, past maxKeys, raises floor.
func (w *window) prune() {
	if len(w.keys) > w.maxKeys {
		ts := make([]int64, 0, len(w.keys))
		for _, t := range w.keys {
			ts = append(ts, t)
		}
		slices.Sort(ts)
		// Keep the newest maxKeys/2 so pruning is not needed again at once.
		if f := ts[len(ts)-w.maxKeys/2] + 1; f > w.floor {
			w.floor = min(f, w.maxTs)
		}
	}
	for k, t := range w.keys {
		if t < w.floor {
			delete(w.keys, k)
		}
	}
	w.inserts = 0
	w.pruneAt = max(1024, len(w.keys)/2)
}

// resumeFrom is where a re-read starts: overlap before the newest entry, but not
// before floor (older entries could not be told apart from those already emitted).
func (w *window) resumeFrom(overlap time.Duration) int64 {
	return max(w.floor, w.maxTs-int64(overlap))
}

// position exports the window: the keys of the entries at or after
// resumeFrom(overlap), at most maxKeys of them (dropping the oldest timestamps whole).
func (w *window) position(overlap time.Duration, maxKeys int) Position {
	since := w.resumeFrom(overlap)
	type kt struct {
		k  key
		ts int64
	}
	var list []kt
	for k, t := range w.keys {
		if t >= since {
			list = append(list, kt{k, t})
		}
	}
	slices.SortFunc(list, func(a, b kt) int {
		if a.ts != b.ts {
			if a.ts < b.ts {
				return -1
			}
			return 1
		}
		return slices.Compare(a.k[:], b.k[:])
	})
	if n := len(list); n > maxKeys {
		cut := n - maxKeys
		// Entries sharing the boundary timestamp go together: Since must split whole
		// timestamps.
		boundary := list[cut].ts
		if list[cut-1].ts == boundary {
			for cut < n && list[cut].ts == boundary {
				cut++
			}
			since = boundary + 1
		} else {
			since = boundary
		}
		list = list[cut:]
	}
	p := Position{Time: unixTime(w.maxTs), Since: unixTime(since)}
	for _, e := range list {
		p.Keys = append(p.Keys, e.k.String())
	}
	return p
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

package lokisource

import (
	"sync"
	"time"

	"github.com/faultline-dev/faultline/logstream"
)

// maxBootNodes bounds the nodes a bootTracker remembers; past it, it starts over
// (each node is then first seen again, which only narrows what it skips).
const maxBootNodes = 100000

// bootTracker tells lines from an earlier boot of their node. Loki cannot order
// boot IDs, so it orders by time: a line whose boot ID is not the node's current
// one, dated before the current one was first seen, ran before that boot. A line of
// a newer boot than the Node object shows yet (the kubelet reports it a little after
// the reboot) is dated after the old ID was first seen, and passes.
type bootTracker struct {
	current func(node string) string

	mu   sync.Mutex
	seen map[string]bootSeen
}

type bootSeen struct {
	id    string
	since time.Time // when id was first seen as the node's current boot
}

func newBootTracker(current func(string) string) *bootTracker {
	if current == nil {
		return nil
	}
	return &bootTracker{current: current, seen: map[string]bootSeen{}}
}

// earlier reports whether a line of node with boot ID boot, dated t, comes from a
// boot before the node's current one. Every line of a node is passed in (not only
// those with another boot ID), so the current ID is seen as early as possible.
func (b *bootTracker) earlier(node, boot string, t, now time.Time) bool {
	if b == nil || node == "" {
		return false
	}
	cur := b.current(node)
	if cur == "" {
		return false
	}
	b.mu.Lock()
	s, ok := b.seen[node]
	if !ok || s.id != cur {
		if len(b.seen) >= maxBootNodes {
			clear(b.seen)
		}
		s = bootSeen{id: cur, since: now}
		b.seen[node] = s
	}
	b.mu.Unlock()
	return boot != "" && boot != cur && t.Before(s.since)
}

// EarlierBoot reports whether l, read by another path than this Source (the
// collector's push), comes from an earlier boot of its node, as deliver judges the
// lines it reads, and counts it as such.
func (s *Source) EarlierBoot(l logstream.Line) bool {
	if !s.boots.earlier(l.Node, l.Labels[logstream.MetaBootID], l.Time, time.Now()) {
		return false
	}
	s.m.EarlierBoot(l.Query, 1)
	return true
}

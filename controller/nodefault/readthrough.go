package nodefault

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// The Store reads records from the NodeFault informer (UseCache) instead of the API
// server, except where the informer has not yet shown the Store's own last write of
// a record: a burst of new faults then costs no read per fault. Reading a cached copy
// is safe for the writes made on it: each update carries the copy's
// resourceVersion (a stale copy gets a conflict and is read again) and each create
// fails if the record exists (then it is read and updated).

// writeTTL bounds how long a record is read from the API server after a write the
// informer has not shown (it may never show that exact version if another write
// followed before the watch delivered it).
const writeTTL = 30 * time.Second

// sweepEvery writes, the expired ones are forgotten.
const sweepEvery = 1024

// readThrough is the Store's view of the informer and of its own writes.
type readThrough struct {
	mu      sync.Mutex
	cache   *Cache
	written map[string]ownWrite // record name →
	byNode  map[string]map[string]bool
	inserts int
}

// ownWrite is the Store's last write of a record: the resourceVersion and UID it
// got, or deleted.
type ownWrite struct {
	node    string
	rv      string
	uid     types.UID
	deleted bool
	at      time.Time
}

// forget drops the Store's last write of name (a record of node). Guarded by mu.
func (rt *readThrough) forget(name, node string) {
	delete(rt.written, name)
	if ns := rt.byNode[node]; ns != nil {
		delete(ns, name)
		if len(ns) == 0 {
			delete(rt.byNode, node)
		}
	}
}

// UseCache makes the Store read records from c once c has synced (nil: always from
// the API server). The caller runs c.
func (s *Store) UseCache(c *Cache) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	s.rt.cache = c
}

// noteWrite records the Store's write of nf (or its deletion).
func (s *Store) noteWrite(nf *v1alpha1.NodeFault, deleted bool) {
	if nf == nil {
		return
	}
	rt := &s.rt
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.written == nil {
		rt.written, rt.byNode = map[string]ownWrite{}, map[string]map[string]bool{}
	}
	now := time.Now()
	if rt.inserts++; rt.inserts%sweepEvery == 0 {
		// Writes of records never read again would stay: forget the expired.
		for name, w := range rt.written {
			if now.Sub(w.at) > writeTTL {
				rt.forget(name, w.node)
			}
		}
	}
	rt.written[nf.Name] = ownWrite{node: nf.Spec.Node, rv: nf.ResourceVersion, uid: nf.UID, deleted: deleted, at: now}
	names := rt.byNode[nf.Spec.Node]
	if names == nil {
		names = map[string]bool{}
		rt.byNode[nf.Spec.Node] = names
	}
	names[nf.Name] = true
}

// cacheFor returns the informer when it has synced and shows the Store's last
// writes of names (nil otherwise: read from the API server). Writes it has caught
// up with, or older than writeTTL, are forgotten.
func (s *Store) cacheFor(node string, names ...string) *Cache {
	rt := &s.rt
	rt.mu.Lock()
	defer rt.mu.Unlock()
	c := rt.cache
	if c == nil || !c.HasSynced() {
		return nil
	}
	if len(names) == 0 {
		for n := range rt.byNode[node] {
			names = append(names, n)
		}
	}
	current := true
	for _, name := range names {
		w, ok := rt.written[name]
		if !ok {
			continue
		}
		cached, found := c.get(name)
		caught := (w.deleted && !found) || (!w.deleted && found && cached.ResourceVersion == w.rv)
		if caught || time.Since(w.at) > writeTTL {
			rt.forget(name, w.node)
			continue
		}
		current = false
	}
	if !current {
		return nil
	}
	return c
}

// Ref returns the reference an Event about the fault of a rule on node names: its
// NodeFault (apiVersion, kind, name and UID); nil when it has none. The UID comes
// from the Store's own last write of the record or from the informer, from the API
// server only where neither knows the record.
func (s *Store) Ref(ctx context.Context, node, pack, rule string) (*corev1.ObjectReference, error) {
	name := Name(node, pack, rule)
	ref := func(uid types.UID) *corev1.ObjectReference {
		return &corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: Kind, Name: name, UID: uid}
	}
	rt := &s.rt
	rt.mu.Lock()
	w, wrote := rt.written[name]
	c := rt.cache
	rt.mu.Unlock()
	switch {
	case wrote && w.deleted:
		return nil, nil
	case wrote && w.uid != "":
		return ref(w.uid), nil
	}
	if c != nil && c.HasSynced() {
		if nf, ok := c.get(name); ok {
			return ref(nf.UID), nil
		}
		if !wrote {
			return nil, nil // none written by this Store, none in the informer
		}
	}
	nf, err := s.Get(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return ref(nf.UID), nil
}

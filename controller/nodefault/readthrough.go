package nodefault

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// The Store reads records from the NodeFault informer (UseCache) instead of the API
// server. Where the informer has not yet shown the Store's own last write of a
// record, the Store reads that write: the record as the write returned it (or its
// absence, after a delete), as long as what the informer shows of the record is a
// version that write followed (the version it was made on, or an earlier one of
// the same unbroken chain of the Store's writes). A burst of new faults then costs
// no read per fault, even while the informer lags seconds behind through it.
// Reading such a copy is as safe for the writes made on it as reading a cached one:
// each update carries the copy's resourceVersion (a stale copy gets a conflict and is
// read again) and each create fails if the record exists (then it is read and
// updated). Where the informer shows a version of another writer's, the record is
// read from the API server.

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

// ownWrite is the Store's last write of a record: what it returned (the record, or
// deleted), and the versions of the record the informer may still show that the
// write followed.
type ownWrite struct {
	// obj is the record as the write returned it, or as it was deleted. Shared: read
	// only.
	obj     *v1alpha1.NodeFault
	deleted bool
	at      time.Time
	// before are the record's versions before this write in an unbroken chain of the
	// Store's own writes, oldest first ("": the record absent, before a create).
	before []string
}

// maxBefore bounds ownWrite.before: a longer chain forgets its oldest versions,
// whose sight then sends the read to the API server.
const maxBefore = 8

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

// noteWrite records the Store's write of nf (or its deletion), made on version base
// of the record ("": the record was absent, a create).
func (s *Store) noteWrite(nf *v1alpha1.NodeFault, deleted bool, base string) {
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
				rt.forget(name, w.obj.Spec.Node)
			}
		}
	}
	before := []string{base}
	if prev, ok := rt.written[nf.Name]; ok && prev.state() == base {
		// Made on the Store's own last write: the chain goes on.
		before = append(slices.Clone(prev.before), base)
		if len(before) > maxBefore {
			before = before[len(before)-maxBefore:]
		}
	}
	// A copy: the caller keeps nf.
	rt.written[nf.Name] = ownWrite{obj: nf.DeepCopy(), deleted: deleted, at: now, before: before}
	names := rt.byNode[nf.Spec.Node]
	if names == nil {
		names = map[string]bool{}
		rt.byNode[nf.Spec.Node] = names
	}
	names[nf.Name] = true
}

// state is the version of the record the write left: its resourceVersion, or ""
// (absent) after a delete.
func (w *ownWrite) state() string {
	if w.deleted {
		return ""
	}
	return w.obj.ResourceVersion
}

// view returns the informer, once synced, with the Store's last writes of names
// (default: of every record of node it wrote) that the informer has not shown yet
// and that are to be read instead of the informer's copies; ok is false where the
// records are to be read from the API server: no synced informer, or one that shows
// a version of a record that the Store's last write of it did not follow. Writes it
// has caught up with, or older than writeTTL, are forgotten.
func (s *Store) view(node string, names ...string) (c *Cache, own map[string]*ownWrite, ok bool) {
	rt := &s.rt
	rt.mu.Lock()
	defer rt.mu.Unlock()
	c = rt.cache
	if c == nil || !c.HasSynced() {
		return nil, nil, false
	}
	if len(names) == 0 {
		for n := range rt.byNode[node] {
			names = append(names, n)
		}
	}
	for _, name := range names {
		w, wrote := rt.written[name]
		if !wrote {
			continue
		}
		shown := ""
		if cached, found := c.get(name); found {
			shown = cached.ResourceVersion
		}
		if shown == w.state() || time.Since(w.at) > writeTTL {
			rt.forget(name, w.obj.Spec.Node)
			continue
		}
		if !slices.Contains(w.before, shown) {
			return nil, nil, false // another writer's version: read the API server
		}
		if own == nil {
			own = map[string]*ownWrite{}
		}
		own[name] = &w
	}
	return c, own, true
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
	case wrote && w.obj.UID != "":
		return ref(w.obj.UID), nil
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

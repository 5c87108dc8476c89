package act

import (
	"maps"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
)

// FactIndex keeps the decide stage's facts (decide.NodeFacts) up to date from the
// Node and NodeFault informers' events, so that a decision reads them without a
// pass over the fleet: a Node event costs the node's own records, a record event
// its node's records. Heartbeats (status updates that change none of the facts)
// change nothing.
//
// Reads are safe while the handlers update: Facts hands out a snapshot whose maps
// are never written again (rebuilt, in O(tainted + opted-out nodes), only after a
// change), and the topology is read through the index's own lock (Groups), so it
// may be newer than the rest of a snapshot; each of its answers is consistent.
type FactIndex struct {
	eligible labels.Selector
	topo     []string // the topology labels whose values the facts carry

	mu       sync.RWMutex
	nodes    map[string]nodeFacts
	records  map[string]recordFacts         // by informer key
	byNode   map[string]map[string]struct{} // node → keys of its records that own a taint
	eligN    int
	optedOut map[string]bool
	tainted  map[string][]string
	groups   map[decide.Group]int // eligible nodes per topology value
	changed  bool                 // since snap was taken
	snap     *decide.NodeFacts
}

// nodeFacts is what the facts need of one cached Node.
type nodeFacts struct {
	eligible, optedOut bool
	topology           map[string]string // eligible nodes only; nil when none; never written
	taints             []keyEffect
}

// recordFacts is what the facts need of one NodeFault record: the taint it owns
// (Placed, or Placing with the Node possibly already updated), if any.
type recordFacts struct {
	node, rule string // rule: pack/rule
	taint      keyEffect
	owns       bool
}

// NewFactIndex returns an empty index; eligible nil counts every node.
func NewFactIndex(eligible labels.Selector, topology []string) *FactIndex {
	if eligible == nil {
		eligible = labels.Everything()
	}
	return &FactIndex{eligible: eligible, topo: topology,
		nodes: map[string]nodeFacts{}, records: map[string]recordFacts{}, byNode: map[string]map[string]struct{}{},
		optedOut: map[string]bool{}, tainted: map[string][]string{}, groups: map[decide.Group]int{}}
}

func (x *FactIndex) factsOf(n *cachedNode) nodeFacts {
	var f nodeFacts
	if n.optedOut() {
		f.optedOut = true
	} else if x.eligible.Matches(labels.Set(n.labels)) {
		f.eligible = true
		for _, l := range x.topo {
			if v := n.labels[l]; v != "" {
				if f.topology == nil {
					f.topology = map[string]string{}
				}
				f.topology[l] = v
			}
		}
	}
	for _, t := range n.taints {
		f.taints = append(f.taints, keyEffect{t.Key, t.Effect})
	}
	return f
}

func (f nodeFacts) equal(o nodeFacts) bool {
	return f.eligible == o.eligible && f.optedOut == o.optedOut && maps.Equal(f.topology, o.topology) &&
		slices.Equal(f.taints, o.taints)
}

func recordFactsOf(nf *v1alpha1.NodeFault) recordFacts {
	r := recordFacts{node: nf.Spec.Node, rule: nf.Spec.Pack + "/" + nf.Spec.Rule}
	if st := nf.Status.Taint; st != nil && (st.State == v1alpha1.TaintPlaced || st.State == v1alpha1.TaintPlacing) {
		if t, ok := parseTaint(st.Taint); ok {
			r.taint, r.owns = keyEffect{t.Key, t.Effect}, true
		}
	}
	return r
}

// AddNode records n, as the Node informer's handler does: for a caller that fills
// the index from a node list (a replay against the live fleet).
func (x *FactIndex) AddNode(n *corev1.Node) { x.setNode(n.Name, cachedOf(n)) }

// setNode records n (nil: the node named name is gone from the cache).
func (x *FactIndex) setNode(name string, n *cachedNode) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, had := x.nodes[name]
	var cur nodeFacts
	if n != nil {
		cur = x.factsOf(n)
	}
	if had == (n != nil) && old.equal(cur) {
		return // a heartbeat: nothing the facts hold changed
	}
	if had {
		x.count(name, old, -1)
	}
	if n != nil {
		x.nodes[name] = cur
		x.count(name, cur, +1)
	} else {
		delete(x.nodes, name)
	}
	x.retaint(name)
	x.changed = true
}

// count adds (d = +1) or removes (-1) node's share of the counts.
func (x *FactIndex) count(node string, f nodeFacts, d int) {
	if f.optedOut {
		if d > 0 {
			x.optedOut[node] = true
		} else {
			delete(x.optedOut, node)
		}
	}
	if f.eligible {
		x.eligN += d
	}
	for l, v := range f.topology {
		g := decide.Group{Label: l, Value: v}
		if x.groups[g] += d; x.groups[g] == 0 {
			delete(x.groups, g)
		}
	}
}

// setRecord records the record under key (nil: deleted).
func (x *FactIndex) setRecord(key string, nf *v1alpha1.NodeFault) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, had := x.records[key]
	var cur recordFacts
	if nf != nil {
		cur = recordFactsOf(nf)
	}
	if had == (nf != nil) && old == cur {
		return
	}
	if had && old.owns {
		if delete(x.byNode[old.node], key); len(x.byNode[old.node]) == 0 {
			delete(x.byNode, old.node)
		}
	}
	if nf != nil {
		x.records[key] = cur
		if cur.owns {
			if x.byNode[cur.node] == nil {
				x.byNode[cur.node] = map[string]struct{}{}
			}
			x.byNode[cur.node][key] = struct{}{}
		}
	} else {
		delete(x.records, key)
	}
	if had {
		x.retaint(old.node)
	}
	if nf != nil && (!had || cur.node != old.node) {
		x.retaint(cur.node)
	}
	x.changed = true
}

// retaint recomputes node's entry of the tainted set: the rules whose records own
// a taint the node carries. Its cost is the node's records.
func (x *FactIndex) retaint(node string) {
	n, ok := x.nodes[node]
	var keys []string
	if ok {
		for key := range x.byNode[node] {
			r := x.records[key]
			if slices.Contains(n.taints, r.taint) {
				keys = append(keys, r.rule)
			}
		}
	}
	if len(keys) == 0 {
		delete(x.tainted, node)
		return
	}
	sort.Strings(keys)
	x.tainted[node] = keys
}

// Facts returns the current facts. Their maps are shared with other callers and
// never written: read them only.
func (x *FactIndex) Facts() decide.NodeFacts {
	x.mu.RLock()
	if !x.changed && x.snap != nil {
		f := *x.snap
		x.mu.RUnlock()
		return f
	}
	x.mu.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.changed || x.snap == nil {
		f := decide.NodeFacts{Eligible: x.eligN, Tainted: maps.Clone(x.tainted), OptedOut: maps.Clone(x.optedOut)}
		if len(x.topo) > 0 {
			f.Groups = x
		}
		x.snap, x.changed = &f, false
	}
	return *x.snap
}

// Labels is decide.TopologyIndex's: node's topology values (a map never written).
func (x *FactIndex) Labels(node string) map[string]string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.nodes[node].topology
}

// Size is decide.TopologyIndex's: the eligible nodes with g's value.
func (x *FactIndex) Size(g decide.Group) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.groups[g]
}

// nodeHandler keeps the index up to date from the Node informer.
func (x *FactIndex) nodeHandler() cache.ResourceEventHandler {
	set := func(obj any) {
		if c, ok := obj.(*cachedNode); ok {
			x.setNode(c.name, c)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				x.setNode(nameOfKey(d.Key), nil)
				return
			}
			if c, ok := obj.(*cachedNode); ok {
				x.setNode(c.name, nil)
			}
		},
	}
}

// recordHandler keeps the index up to date from the NodeFault informer.
func (x *FactIndex) recordHandler() cache.ResourceEventHandler {
	set := func(obj any, deleted bool) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		nf, _ := obj.(*v1alpha1.NodeFault)
		if deleted || nf == nil {
			x.setRecord(key, nil)
			return
		}
		x.setRecord(key, nf)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj, false) },
		UpdateFunc: func(_, obj any) { set(obj, false) },
		DeleteFunc: func(obj any) { set(obj, true) },
	}
}

// nameOfKey is the name part of an informer key (namespace/name, or name).
func nameOfKey(key string) string {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return key
	}
	return name
}

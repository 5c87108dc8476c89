package act

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
)

// oracleFacts are facts computed from scratch, the topology as a plain map.
type oracleFacts struct {
	decide.NodeFacts
	topology map[string]map[string]string
}

// recomputeFacts is the facts computed from scratch, with a pass over every Node and
// every record, as the Actor did per decision before the index: the oracle the
// index is held to.
func recomputeFacts(nodes []*corev1.Node, recs []*v1alpha1.NodeFault, eligible labels.Selector, topo []string) oracleFacts {
	f := oracleFacts{NodeFacts: decide.NodeFacts{Tainted: map[string][]string{}, OptedOut: map[string]bool{}}}
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
		if OptedOut(n) {
			f.OptedOut[n.Name] = true
		} else if eligible.Matches(labels.Set(n.Labels)) {
			f.Eligible++
			for _, l := range topo {
				if v := n.Labels[l]; v != "" {
					if f.topology == nil {
						f.topology = map[string]map[string]string{}
					}
					if f.topology[n.Name] == nil {
						f.topology[n.Name] = map[string]string{}
					}
					f.topology[n.Name][l] = v
				}
			}
		}
	}
	// A node carries faultline's taint for a fault when the fault's record owns it
	// (Placed, or Placing with the Node already updated) and the node has it.
	for _, nf := range recs {
		st := nf.Status.Taint
		if st == nil || (st.State != v1alpha1.TaintPlaced && st.State != v1alpha1.TaintPlacing) {
			continue
		}
		if n := byName[nf.Spec.Node]; n != nil && hasTaintOf(n, st.Taint) {
			f.Tainted[n.Name] = append(f.Tainted[n.Name], nf.Spec.Pack+"/"+nf.Spec.Rule)
		}
	}
	for _, keys := range f.Tainted {
		sort.Strings(keys)
	}
	return f
}

const (
	rackLabel = "topology.kubernetes.io/rack"
	zoneLabel = "topology.kubernetes.io/zone"
)

var (
	gpuNodes     = labels.SelectorFromSet(labels.Set{"gpu": "true"})
	topoLabels   = []string{rackLabel, zoneLabel}
	ruleTaint    = "faultline.io/faulty=xid:NoSchedule"
	taintChoices = []corev1.Taint{
		{Key: "faultline.io/faulty", Value: "xid", Effect: corev1.TaintEffectNoSchedule},
		{Key: "faultline.io/faulty", Value: "other", Effect: corev1.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute},
	}
	recordTaints = []string{ruleTaint, "faultline.io/faulty:NoExecute", "node.kubernetes.io/unreachable:NoExecute", "not a taint"}
	taintStates  = []v1alpha1.TaintState{v1alpha1.TaintPlaced, v1alpha1.TaintPlacing, v1alpha1.TaintExisting}
	rulesOf      = [][2]string{{"nvidia-xid", "xid-79"}, {"nvidia-xid", "xid-48"}, {"nvlink", "down"}}
)

// randomNode is a node named name with random labels (eligible or not, opted out or
// not, topology values or none) and taints.
func randomNode(r *rand.Rand, name string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if r.IntN(4) > 0 {
		n.Labels["gpu"] = "true"
	}
	switch r.IntN(6) {
	case 0:
		n.Labels[fault.LabelOptOut] = "true"
	case 1:
		n.Labels[fault.LabelOptOut] = "TRUE"
	case 2:
		n.Labels[fault.LabelOptOut] = "false"
	}
	if v := []string{"", "r1", "r2", "r3"}[r.IntN(4)]; v != "" {
		n.Labels[rackLabel] = v
	}
	if r.IntN(2) == 0 {
		n.Labels[zoneLabel] = []string{"z1", "z2"}[r.IntN(2)]
	}
	for _, t := range taintChoices {
		if r.IntN(2) == 0 {
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
	}
	return n
}

// randomRecord is a record named name of a random node among nodeNames, with a
// random taint entry (or none).
func randomRecord(r *rand.Rand, name string, nodeNames []string) *v1alpha1.NodeFault {
	ru := rulesOf[r.IntN(len(rulesOf))]
	nf := &v1alpha1.NodeFault{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodeFaultSpec{Node: nodeNames[r.IntN(len(nodeNames))], Pack: ru[0], Rule: ru[1]}}
	if r.IntN(5) > 0 {
		nf.Status.Taint = &v1alpha1.TaintRecord{Taint: recordTaints[r.IntN(len(recordTaints))],
			State: taintStates[r.IntN(len(taintStates))]}
	}
	return nf
}

// fleetModel is the informers' stores and the index fed their events, as the
// informers would deliver them.
type fleetModel struct {
	r        *rand.Rand
	names    []string // node names: some of them are never created
	nodes    map[string]*corev1.Node
	recs     map[string]*v1alpha1.NodeFault
	idx      *FactIndex
	nodeH    cache.ResourceEventHandler
	recordH  cache.ResourceEventHandler
	recNames []string
}

func newFleetModel(seed uint64, nodes, records int) *fleetModel {
	m := &fleetModel{r: rand.New(rand.NewPCG(seed, 1)), nodes: map[string]*corev1.Node{},
		recs: map[string]*v1alpha1.NodeFault{}, idx: NewFactIndex(gpuNodes, topoLabels)}
	m.nodeH, m.recordH = m.idx.nodeHandler(), m.idx.recordHandler()
	for i := range nodes + nodes/4 {
		m.names = append(m.names, fmt.Sprintf("node-%05d", i))
	}
	for i := range records {
		m.recNames = append(m.recNames, fmt.Sprintf("fault-%04d", i))
	}
	return m
}

// step makes one random change: a Node or a record added, updated or deleted
// (deletions sometimes as the final state unknown, as after a missed watch).
func (m *fleetModel) step() {
	tombstone := func(key string, obj any) any {
		if m.r.IntN(3) == 0 {
			return cache.DeletedFinalStateUnknown{Key: key, Obj: obj}
		}
		return obj
	}
	if m.r.IntN(2) == 0 {
		name := m.names[m.r.IntN(len(m.names))]
		old, had := m.nodes[name]
		switch {
		case !had:
			n := randomNode(m.r, name)
			m.nodes[name] = n
			m.nodeH.OnAdd(cachedOf(n), false)
		case m.r.IntN(5) == 0:
			delete(m.nodes, name)
			m.nodeH.OnDelete(tombstone(name, cachedOf(old)))
		default:
			n := randomNode(m.r, name)
			if m.r.IntN(3) == 0 { // a heartbeat: the same facts, another status
				n = old.DeepCopy()
				n.Status.NodeInfo.BootID = fmt.Sprint(m.r.Int())
			}
			m.nodes[name] = n
			m.nodeH.OnUpdate(cachedOf(old), cachedOf(n))
		}
		return
	}
	name := m.recNames[m.r.IntN(len(m.recNames))]
	old, had := m.recs[name]
	switch {
	case !had:
		nf := randomRecord(m.r, name, m.names)
		m.recs[name] = nf
		m.recordH.OnAdd(nf, false)
	case m.r.IntN(5) == 0:
		delete(m.recs, name)
		m.recordH.OnDelete(tombstone(name, old))
	default:
		nf := randomRecord(m.r, name, m.names)
		if m.r.IntN(2) == 0 { // the same fault, its taint entry moved on
			nf.Spec = old.Spec
		}
		m.recs[name] = nf
		m.recordH.OnUpdate(old, nf)
	}
}

func (m *fleetModel) oracle() oracleFacts {
	return recomputeFacts(slicesOf(m.nodes), slicesOf(m.recs), gpuNodes, topoLabels)
}

func slicesOf[T any](m map[string]*T) []*T {
	out := make([]*T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// sameFacts reports how got (from the index) differs from want (recomputed), or "".
func sameFacts(got decide.NodeFacts, want oracleFacts, names []string) string {
	if got.Eligible != want.Eligible {
		return fmt.Sprintf("eligible %d, want %d", got.Eligible, want.Eligible)
	}
	if !reflect.DeepEqual(got.Tainted, want.Tainted) {
		return fmt.Sprintf("tainted %v, want %v", got.Tainted, want.Tainted)
	}
	if !maps.Equal(got.OptedOut, want.OptedOut) {
		return fmt.Sprintf("opted out %v, want %v", got.OptedOut, want.OptedOut)
	}
	if got.Groups == nil {
		return "no topology index"
	}
	sizes := map[decide.Group]int{}
	for _, n := range names {
		if l := got.Groups.Labels(n); !maps.Equal(l, want.topology[n]) {
			return fmt.Sprintf("topology of %s %v, want %v", n, l, want.topology[n])
		}
		for l, v := range want.topology[n] {
			sizes[decide.Group{Label: l, Value: v}]++
		}
	}
	for _, l := range topoLabels {
		for _, v := range []string{"r1", "r2", "r3", "z1", "z2", "none"} {
			g := decide.Group{Label: l, Value: v}
			if got.Groups.Size(g) != sizes[g] {
				return fmt.Sprintf("group %s has %d nodes, want %d", g, got.Groups.Size(g), sizes[g])
			}
		}
	}
	return ""
}

// TestFactIndexMatchesRecomputation drives random sequences of Node and record
// adds, updates and deletes through the index and compares its facts after every
// change with the facts recomputed from the stores: the budget and the storm hold
// see exactly what a pass over the fleet would show them.
func TestFactIndexMatchesRecomputation(t *testing.T) {
	for seed := range uint64(20) {
		m := newFleetModel(seed, 40, 60)
		for i := range 3000 {
			m.step()
			if diff := sameFacts(m.idx.Facts(), m.oracle(), m.names); diff != "" {
				t.Fatalf("seed %d, step %d: %s", seed, i, diff)
			}
		}
	}
}

// TestFactIndexReuse: facts are rebuilt only after a change of what they hold; a
// heartbeat (a Node update that changes none of it) returns the same maps, and a
// snapshot handed out is never written afterwards.
func TestFactIndexReuse(t *testing.T) {
	x := NewFactIndex(labels.Everything(), nil)
	h := x.nodeHandler()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{fault.LabelOptOut: "true"}}}
	h.OnAdd(cachedOf(n), false)
	first := x.Facts()
	if !first.OptedOut["n1"] || first.Groups != nil {
		t.Fatalf("facts %+v", first)
	}
	beat := n.DeepCopy()
	beat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	h.OnUpdate(cachedOf(n), cachedOf(beat))
	if again := x.Facts(); reflect.ValueOf(again.OptedOut).UnsafePointer() != reflect.ValueOf(first.OptedOut).UnsafePointer() {
		t.Error("facts rebuilt after a heartbeat")
	}
	in := beat.DeepCopy()
	delete(in.Labels, fault.LabelOptOut)
	h.OnUpdate(cachedOf(beat), cachedOf(in))
	if f := x.Facts(); f.OptedOut["n1"] || f.Eligible != 1 || !first.OptedOut["n1"] || first.Eligible != 0 {
		t.Fatalf("after opting in: %+v; the earlier snapshot %+v", f, first)
	}
}

// TestFactIndexConcurrent reads facts (and the topology through them) while the
// handlers apply changes; run with -race it shows the reads are safe.
func TestFactIndexConcurrent(t *testing.T) {
	m := newFleetModel(7, 200, 300)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				f := m.idx.Facts()
				used := 0
				for n, keys := range f.Tainted {
					used += len(keys)
					_ = f.OptedOut[n]
					for l, v := range f.Groups.Labels(n) {
						if f.Groups.Size(decide.Group{Label: l, Value: v}) < 0 {
							t.Error("negative group size")
						}
					}
				}
				if used < len(f.Tainted) || f.Eligible < 0 {
					t.Errorf("facts %+v", f)
				}
			}
		}()
	}
	for range 20000 {
		m.step()
	}
	close(stop)
	wg.Wait()
	if diff := sameFacts(m.idx.Facts(), m.oracle(), m.names); diff != "" {
		t.Fatal(diff)
	}
}

// BenchmarkFacts: the facts a decision reads after one Node changed (the taint it
// placed), from the index and recomputed with a pass over the fleet (the way
// before the index), at 2,000 and 20,000 nodes with 1 % of them tainted.
func BenchmarkFacts(b *testing.B) {
	for _, size := range []int{2000, 20000} {
		x := NewFactIndex(gpuNodes, topoLabels)
		nh, rh := x.nodeHandler(), x.recordHandler()
		var nodes []*corev1.Node
		var recs []*v1alpha1.NodeFault
		for i := range size {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i),
				Labels: map[string]string{"gpu": "true", rackLabel: fmt.Sprintf("r%d", i/32), zoneLabel: "z1"}}}
			if i%100 == 0 {
				n.Spec.Taints = taintChoices[:1]
				nf := &v1alpha1.NodeFault{ObjectMeta: metav1.ObjectMeta{Name: "f-" + n.Name},
					Spec:   v1alpha1.NodeFaultSpec{Node: n.Name, Pack: "nvidia-xid", Rule: "xid-79"},
					Status: v1alpha1.NodeFaultStatus{Taint: &v1alpha1.TaintRecord{Taint: ruleTaint, State: v1alpha1.TaintPlaced}}}
				recs = append(recs, nf)
				rh.OnAdd(nf, true)
			}
			nodes = append(nodes, n)
			nh.OnAdd(cachedOf(n), true)
		}
		// Each iteration: node 1 gains or loses a taint, then a decision reads the facts.
		flip := func(i int) {
			old := nodes[1]
			n := old.DeepCopy()
			if i%2 == 0 {
				n.Spec.Taints = taintChoices[1:2]
			} else {
				n.Spec.Taints = nil
			}
			nodes[1] = n
			nh.OnUpdate(cachedOf(old), cachedOf(n))
		}
		b.Run(fmt.Sprintf("index/nodes=%d", size), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				flip(i)
				if f := x.Facts(); f.Eligible != size {
					b.Fatal(f.Eligible)
				}
			}
		})
		b.Run(fmt.Sprintf("recompute/nodes=%d", size), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				flip(i)
				if f := recomputeFacts(nodes, recs, gpuNodes, topoLabels); f.Eligible != size {
					b.Fatal(f.Eligible)
				}
			}
		})
	}
}

// hasTaintOf reports whether n carries the taint (key and effect) of a record entry.
func hasTaintOf(n *corev1.Node, taint string) bool {
	t, ok := parseTaint(taint)
	return ok && findTaint(n.Spec.Taints, t.Key, t.Effect) != nil
}

package scale_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/rules"
)

// taintWatch follows every Node with an informer and records when each first carried
// faultline's taint, and the most nodes that carried it at once.
type taintWatch struct {
	mu      sync.Mutex
	first   map[string]time.Time // node → when the taint was first seen
	current map[string]bool      // nodes carrying it now
	most    int
	// breaks counts the watches that ended with an error; late, the taints first
	// seen more than 2 s after their write (see observe).
	breaks, late int
}

// watchTaints starts the informer and waits for its first list.
func watchTaints(ctx context.Context, cs kubernetes.Interface) (*taintWatch, error) {
	w := &taintWatch{first: map[string]time.Time{}, current: map[string]bool{}}
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Nodes().Informer()
	// Only names and taints matter here: 20,000 full Nodes would make the test, not
	// the controller, the largest process on the machine.
	if err := inf.SetTransform(func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion, ManagedFields: writes(n)},
			Spec: corev1.NodeSpec{Taints: n.Spec.Taints}}, nil
	}); err != nil {
		return nil, fmt.Errorf("node informer transform: %w", err)
	}
	if err := inf.SetWatchErrorHandler(func(r *cache.Reflector, err error) {
		w.mu.Lock()
		w.breaks++
		w.mu.Unlock()
		cache.DefaultWatchErrorHandler(r, err)
	}); err != nil {
		return nil, fmt.Errorf("node informer watch errors: %w", err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj) },
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				w.mu.Lock()
				delete(w.current, n.Name)
				w.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("node informer handler: %w", err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("node informer did not sync: %w", ctx.Err())
	}
	return w, nil
}

func (w *taintWatch) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	tainted := false
	for _, t := range n.Spec.Taints {
		if t.Key == rules.DefaultTaintKey {
			tainted = true
		}
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !tainted {
		delete(w.current, n.Name)
		return
	}
	w.current[n.Name] = true
	if _, seen := w.first[n.Name]; !seen {
		// A watch that broke on a busy apiserver ("unable to decode an event from
		// the watch stream") is followed by a list of every Node, seconds later:
		// a taint written in between is first seen then. The write's own time (its
		// managed fields', to the second) bounds when it happened; a taint seen
		// within 2 s of its write is timed as seen.
		if wrote := lastWrite(n); !wrote.IsZero() && wrote.Add(2*time.Second).Before(now) {
			now = wrote.Add(time.Second)
			w.late++
		}
		w.first[n.Name] = now
	}
	w.most = max(w.most, len(w.current))
}

// writes keeps, of a Node's managed fields, only the time of the last write of the
// Node itself (not its status): all lastWrite reads.
func writes(n *corev1.Node) []metav1.ManagedFieldsEntry {
	var last *metav1.Time
	for _, m := range n.ManagedFields {
		if m.Subresource == "" && m.Time != nil && (last == nil || m.Time.After(last.Time)) {
			last = m.Time
		}
	}
	if last == nil {
		return nil
	}
	return []metav1.ManagedFieldsEntry{{Time: last}}
}

// lastWrite is the time of the last write of the Node itself (zero if unknown): on a
// Node of the test's fleet, after its creation, the controller's taint.
func lastWrite(n *corev1.Node) time.Time {
	var last time.Time
	for _, m := range writes(n) {
		last = m.Time.Time
	}
	return last
}

// seenLate returns how many watches of the Nodes broke and how many taints were
// timed by their write (see observe).
func (w *taintWatch) seenLate() (breaks, late int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.breaks, w.late
}

// taintedAt returns when node was first seen tainted.
func (w *taintWatch) taintedAt(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.first[node]
	return at, ok
}

// snapshot returns the nodes ever tainted and the most tainted at once.
func (w *taintWatch) snapshot() (ever map[string]time.Time, most int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ever = make(map[string]time.Time, len(w.first))
	for k, v := range w.first {
		ever[k] = v
	}
	return ever, w.most
}

// TestLateSightingsTimedByTheirWrite: a taint seen long after its write (a watch
// broke and the Nodes were listed again) is timed by the write, to the second; one
// seen at once is timed as seen.
func TestLateSightingsTimedByTheirWrite(t *testing.T) {
	w := &taintWatch{first: map[string]time.Time{}, current: map[string]bool{}}
	node := func(name string, wrote time.Time) *corev1.Node {
		at := metav1.NewTime(wrote)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "faultline", Time: &at}}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: rules.DefaultTaintKey, Effect: corev1.TaintEffectNoSchedule}}}}
	}
	wrote := time.Now().Add(-30 * time.Second).Truncate(time.Second)
	w.observe(node("late", wrote))
	before := time.Now()
	w.observe(node("prompt", time.Now()))
	if at, _ := w.taintedAt("late"); !at.Equal(wrote.Add(time.Second)) {
		t.Errorf("late sighting timed %v, want its write's second's end %v", at, wrote.Add(time.Second))
	}
	if at, _ := w.taintedAt("prompt"); at.Before(before) {
		t.Errorf("prompt sighting timed %v, before it was seen (%v)", at, before)
	}
	if _, late := w.seenLate(); late != 1 {
		t.Errorf("%d sightings counted late, want 1", late)
	}
}

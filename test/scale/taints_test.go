package scale_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
		return &corev1.Node{ObjectMeta: n.ObjectMeta, Spec: corev1.NodeSpec{Taints: n.Spec.Taints}}, nil
	}); err != nil {
		return nil, fmt.Errorf("node informer transform: %w", err)
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
		w.first[n.Name] = now
	}
	w.most = max(w.most, len(w.current))
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

package controller_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

// TestConcurrentBurstsKeepBudget: decisions are made one at a time and carried out
// by many workers at once; the budget must stay exact. Rounds of random bursts
// (Xid 79 on random nodes, pushed at once) with failures mixed in (nodes that do
// not exist, a node opted out just before its burst) never leave more nodes
// tainted at once than the budget, as a watch on the apiserver's Nodes sees them;
// every fault is decided, and the budget is used up again after each round.
func TestConcurrentBurstsKeepBudget(t *testing.T) {
	const fleet, budget, rounds, perRound = 30, 5, 4, 14
	var nodes []string
	for i := range fleet {
		nodes = append(nodes, fmt.Sprintf("gpu-%02d", i))
	}
	cl := newCluster(t, nodes...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The watch counts the nodes carrying a faultline taint at every change.
	// taintedOptedOut lists the nodes that gained a faultline taint while labelled
	// opted out, in the watch's order (a taint placed just before the label, by a
	// held fault of an earlier round going ahead, is allowed).
	var taintedOptedOut []string
	tw := watchTaints(ctx, t, cl, func(n *corev1.Node) {
		if n.Labels[fault.LabelOptOut] == "true" {
			taintedOptedOut = append(taintedOptedOut, n.Name)
		}
	})
	defer tw.stop()

	r := cl.start(options{decide: decide.Config{MaxPercent: 100, MaxNodes: budget, DisableStorm: true}, actWorkers: 8})
	decided := func() float64 { return sum(r.m.Decisions()) }
	rng := rand.New(rand.NewPCG(17, uint64(time.Now().UnixNano())))
	pushed := 0
	for round := range rounds {
		// A node opted out just before its burst: the decision may or may not see the
		// label yet; the taint is refused either way. (A held fault of an earlier
		// round may have tainted it just before the label: the watch tells.)
		optOut := nodes[rng.IntN(fleet)]
		cl.setLabel(optOut, fault.LabelOptOut, "true")
		burst := []string{optOut, fmt.Sprintf("ghost-%d-a", round), fmt.Sprintf("ghost-%d-b", round)}
		for _, i := range rng.Perm(fleet)[:perRound] {
			if nodes[i] != optOut {
				burst = append(burst, nodes[i])
			}
		}
		var wg sync.WaitGroup
		now := time.Now()
		for _, n := range burst {
			wg.Add(1)
			go func() { defer wg.Done(); cl.push(n, now, xid79) }()
		}
		wg.Wait()
		pushed += len(burst)
		cl.waitFor(fmt.Sprintf("round %d: all %d faults decided", round, pushed), 60*time.Second,
			func() bool { return decided() >= float64(pushed) })
		count := func() int {
			c := 0
			for _, n := range nodes {
				if cl.tainted(n) {
					c++
				}
			}
			return c
		}
		cl.waitFor(fmt.Sprintf("round %d: the budget used up", round), 30*time.Second, func() bool { return count() >= budget })
		if over := tw.most(); over > budget {
			t.Fatalf("round %d: %d nodes tainted at once, budget %d", round, over, budget)
		}
		if c := count(); c != budget {
			t.Fatalf("round %d: %d nodes tainted, budget %d", round, c, budget)
		}
		tw.mu.Lock()
		if len(taintedOptedOut) > 0 {
			t.Errorf("round %d: tainted while opted out: %v", round, taintedOptedOut)
		}
		tw.mu.Unlock()
		// Free the budget for the next round: held faults of earlier rounds go ahead
		// meanwhile, under the same budget.
		cl.setLabel(optOut, fault.LabelOptOut, "false")
		for _, n := range nodes {
			if cl.tainted(n) {
				if _, err := r.c.Untaint(ctx, n, "", "untainted by the test"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	time.Sleep(time.Second) // the watch catches up
	most := tw.most()
	if most > budget {
		t.Errorf("%d nodes tainted at once, budget %d", most, budget)
	}
	if most < budget {
		t.Errorf("at most %d nodes tainted at once: the watch missed the taints (budget %d)", most, budget)
	}
	t.Logf("%d faults over %d rounds, at most %d nodes tainted at once", pushed, rounds, most)
}

// taintWatch counts, from a watch on the API server's Nodes, the nodes carrying a
// faultline taint at every change, and keeps the most seen at once.
type taintWatch struct {
	mu      sync.Mutex
	tainted map[string]bool
	highest int
	stop    func()
}

// watchTaints starts a taintWatch; gained, when not nil, is called (under the
// watch's lock) with each node that just gained a faultline taint.
func watchTaints(ctx context.Context, t *testing.T, cl *cluster, gained func(*corev1.Node)) *taintWatch {
	t.Helper()
	w, err := cl.cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tw := &taintWatch{tainted: map[string]bool{}}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			tw.mu.Lock()
			was := tw.tainted[n.Name]
			tw.tainted[n.Name] = ev.Type != watch.Deleted && hasFaultTaint(n)
			if !was && tw.tainted[n.Name] && gained != nil {
				gained(n)
			}
			c := 0
			for _, on := range tw.tainted {
				if on {
					c++
				}
			}
			tw.highest = max(tw.highest, c)
			tw.mu.Unlock()
		}
	}()
	tw.stop = func() { w.Stop(); <-watched }
	return tw
}

// most is the most nodes seen tainted at once so far.
func (tw *taintWatch) most() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.highest
}

func hasFaultTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == rules.DefaultTaintKey {
			return true
		}
	}
	return false
}

// setLabel sets a label on a node (a merge patch: no conflict with the controller's
// writes).
func (cl *cluster) setLabel(node, key, value string) {
	cl.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := cl.cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		cl.t.Fatal(err)
	}
}

// sum adds up every series of a counter vector.
func sum(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err == nil {
			total += d.GetCounter().GetValue()
		}
	}
	return total
}

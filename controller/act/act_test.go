package act

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// writeCounter counts the requests that write Nodes (PUT, PATCH) and NodeFault
// records (POST, PUT) through a client, its reads of records (by name or by node)
// and its lists of Nodes.
type writeCounter struct{ n, records, recordReads, lists atomic.Int64 }

type countingTransport struct {
	rt http.RoundTripper
	c  *writeCounter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if (r.Method == http.MethodPut || r.Method == http.MethodPatch) && strings.HasPrefix(r.URL.Path, "/api/v1/nodes") {
		t.c.n.Add(1)
	}
	if r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes" && r.URL.Query().Get("watch") != "true" {
		t.c.lists.Add(1)
	}
	if (r.Method == http.MethodPut || r.Method == http.MethodPost) && strings.HasPrefix(r.URL.Path, "/apis/faultline.io/") {
		t.c.records.Add(1)
	}
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/apis/faultline.io/") && r.URL.Query().Get("watch") != "true" &&
		(!strings.HasSuffix(r.URL.Path, "/nodefaults") || r.URL.Query().Has("labelSelector")) {
		// A record by name, or a node's records by label: the informer's lists
		// (its first, and a relist when a watch ends early) are neither.
		t.c.recordReads.Add(1)
	}
	return t.rt.RoundTrip(r)
}

// startActor builds and starts an Actor on cfg, counting its Node writes; it stops
// with the test.
func startActor(t *testing.T, cfg *rest.Config, opts Options) (*Actor, *writeCounter) {
	t.Helper()
	wc := &writeCounter{}
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, wc} }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Instance = "test"
	a, err := New(cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	return a, wc
}

func rule(pack, id, key, value string) *rules.Compiled {
	return &rules.Compiled{ID: id, Pack: pack, Severity: rules.SeverityCritical, Action: rules.ActionTaint,
		Taint: rules.Taint{Key: key, Value: value, Effect: "NoSchedule"}, Recover: rules.Recover{Manual: true}}
}

func xidFault(node string, r *rules.Compiled, at time.Time) fault.Fault {
	line := "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	return fault.Fault{Node: node, Rule: r, Captures: map[string]string{"xid": "79", "pci": "0000:3b:00"},
		Count: 1, Time: at, Evidence: []logstream.Line{{Time: at, Text: line}}}
}

func createNodes(t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.present": "true"}},
			Status: corev1.NodeStatus{
				NodeInfo: corev1.NodeSystemInfo{BootID: "boot-" + name},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
					Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			},
		}
		if _, err := cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
	}
}

func getNode(t *testing.T, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func updateNode(t *testing.T, cs kubernetes.Interface, name string, mutate func(*corev1.Node)) *corev1.Node {
	t.Helper()
	for {
		n := getNode(t, cs, name)
		mutate(n)
		u, err := cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		if err == nil {
			return u
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatalf("update node %s: %v", name, err)
		}
	}
}

// waitCached waits until the Actor's cache holds the node at resourceVersion rv.
func waitCached(t *testing.T, a *Actor, name, rv string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := a.Nodes().Get(name); err == nil && n.ResourceVersion == rv {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("cache never saw node %s at resourceVersion %s", name, rv)
}

func hasTaint(n *corev1.Node, s string) bool {
	for _, t := range n.Spec.Taints {
		if taintString(t) == s {
			return true
		}
	}
	return false
}

// recordedOn returns the faults the records of node hold a taint entry for, read
// from the API server, sorted by pack/rule.
func recordedOn(t *testing.T, a *Actor, node string) []claim {
	t.Helper()
	r, err := a.readRecorded(context.Background(), node, true)
	if err != nil {
		t.Fatal(err)
	}
	return r.entries
}

// nodeEvents lists the Events on a node (fieldSelector involvedObject.name=node),
// waiting until want(events) holds.
func nodeEvents(t *testing.T, cs kubernetes.Interface, node string, want func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	var items []corev1.Event
	// Returns what is there after the timeout too: callers check the events themselves.
	deadline := time.Now().Add(15 * time.Second)
	eventually.True(t, 16*time.Second, "events on "+node, func() bool {
		l, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(),
			metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node})
		if err != nil {
			t.Fatal(err)
		}
		items = l.Items
		return want(items) || time.Now().After(deadline)
	})
	return items
}

func withReason(reason string) func([]corev1.Event) bool {
	return func(evs []corev1.Event) bool { return countReason(evs, reason) > 0 }
}

func countReason(evs []corev1.Event, reason string) int {
	c := 0
	for _, e := range evs {
		if e.Reason == reason {
			c++
		}
	}
	return c
}

// foreignTaints are the taints on n faultline does not own.
func foreignTaints(t *testing.T, a *Actor, n *corev1.Node) []corev1.Taint {
	owned := map[string]bool{}
	for _, e := range recordedOn(t, a, n.Name) {
		if e.placed {
			owned[e.taint] = true
		}
	}
	var out []corev1.Taint
	for _, tt := range n.Spec.Taints {
		if !owned[taintString(tt)] {
			out = append(out, tt)
		}
	}
	return out
}

// TestActor runs the Actor against a real kube-apiserver (one for all subtests;
// each uses its own nodes).
func TestActor(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	env.InstallCRD(t, v1alpha1.CRDYAML)
	cs := env.Clientset()
	ctx := context.Background()
	xid := rule("nvidia-xid", "xid-gpu-lost", rules.DefaultTaintKey, "xid-gpu-lost")
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

	t.Run("TaintsOnlyTheFaultyNode", func(t *testing.T) {
		names := []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"}
		createNodes(t, cs, names...)
		a, _ := startActor(t, env.RESTConfig(), Options{})
		boot, err := a.BootID("gpu-3")
		if err != nil || boot != "boot-gpu-3" {
			t.Fatalf("BootID = %q, %v", boot, err)
		}
		res, err := a.TaintNode(ctx, xidFault("gpu-3", xid, t0), boot)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Changed || !res.NewFault || len(res.Added) != 1 || res.Attempts != 1 {
			t.Fatalf("result %+v", res)
		}
		n := getNode(t, cs, "gpu-3")
		want := "faultline.io/faulty=xid-gpu-lost:NoSchedule"
		if !hasTaint(n, want) {
			t.Fatalf("gpu-3 taints %v, want %s", n.Spec.Taints, want)
		}
		evs := recordedOn(t, a, "gpu-3")
		if len(evs) != 1 || evs[0].id() != "nvidia-xid/xid-gpu-lost" || !evs[0].placed || evs[0].taint != want {
			t.Fatalf("recorded %+v", evs)
		}
		nf, err := a.records.Get(ctx, nodefault.Name("gpu-3", "nvidia-xid", "xid-gpu-lost"))
		if err != nil || nf.Status.Taint == nil || nf.Status.Taint.State != v1alpha1.TaintPlaced || nf.Spec.Taint != want ||
			nf.Spec.Severity != "critical" {
			t.Fatalf("NodeFault %+v, %v", nf, err)
		}
		// The write came from the trimmed cache copy: the managed fields of the
		// node's creator must survive it.
		managers := map[string]bool{}
		for _, m := range n.ManagedFields {
			managers[m.Manager] = true
		}
		if !managers[Component] || len(managers) < 2 {
			t.Fatalf("managed fields after Taint: %v", managers)
		}
		t.Logf("gpu-3 taints: %v", n.Spec.Taints)
		if n.Annotations[fault.AnnotationFaults] != nf.Name {
			t.Fatalf("pointer annotation %q, want %q", n.Annotations[fault.AnnotationFaults], nf.Name)
		}
		for _, name := range names {
			if name == "gpu-3" {
				continue
			}
			o := getNode(t, cs, name)
			if _, ok := o.Annotations[fault.AnnotationFaults]; ok {
				t.Errorf("%s points to faults", name)
			}
			for _, tt := range o.Spec.Taints {
				if strings.HasPrefix(tt.Key, "faultline.io/") {
					t.Errorf("%s has taint %v", name, tt)
				}
			}
		}
		evts := nodeEvents(t, cs, "gpu-3", withReason(ReasonTainted))
		var ev *corev1.Event
		for i := range evts {
			if evts[i].Reason == ReasonTainted {
				ev = &evts[i]
			}
		}
		if ev == nil {
			t.Fatalf("no %s event on gpu-3: %+v", ReasonTainted, evts)
		}
		if ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.UID != n.UID || ev.Type != corev1.EventTypeWarning ||
			ev.Source.Component != Component || ev.Annotations[EventAnnotationRule] != "nvidia-xid/xid-gpu-lost" ||
			!strings.Contains(ev.Message, want) || !strings.Contains(ev.Message, "fallen off the bus") {
			t.Fatalf("event %+v", ev)
		}
		t.Logf("event: %s %s: %s", ev.Type, ev.Reason, ev.Message)
		for _, name := range names {
			if name != "gpu-3" {
				if evs := nodeEvents(t, cs, name, func([]corev1.Event) bool { return true }); len(evs) > 0 {
					t.Errorf("events on %s: %+v", name, evs)
				}
			}
		}
		// The cache-backed reads see it too.
		waitCached(t, a, "gpu-3", n.ResourceVersion)
		eventually.NoError(t, 10*time.Second, "gpu-3's fault in the caches", func() error {
			active, err := a.ListActive()
			if err != nil || len(active) != 1 || active[0].Node != "gpu-3" || len(active[0].Faults) != 1 || !active[0].Faults[0].Status.OwnsTaint() {
				return fmt.Errorf("ListActive = %+v, %v", active, err)
			}
			facts, err := a.Facts()
			if err != nil || !reflect.DeepEqual(facts.Tainted, map[string][]string{"gpu-3": {"nvidia-xid/xid-gpu-lost"}}) {
				return fmt.Errorf("Facts = %+v, %v", facts, err)
			}
			return nil
		})
	})

	t.Run("IdempotentSecondTaint", func(t *testing.T) {
		createNodes(t, cs, "idem-1")
		a, wc := startActor(t, env.RESTConfig(), Options{})
		f := xidFault("idem-1", xid, t0)
		if err := a.Taint(ctx, f, "b"); err != nil {
			t.Fatal(err)
		}
		n1 := getNode(t, cs, "idem-1")
		waitCached(t, a, "idem-1", n1.ResourceVersion)
		before, beforeRecords := wc.n.Load(), wc.records.Load()
		res, err := a.TaintNode(ctx, f, "b")
		if err != nil {
			t.Fatal(err)
		}
		n2 := getNode(t, cs, "idem-1")
		if res.Changed || len(res.Added) != 0 || wc.n.Load() != before || n2.ResourceVersion != n1.ResourceVersion || wc.records.Load() != beforeRecords {
			t.Fatalf("second Taint wrote: result %+v, node writes %d -> %d, record writes %d -> %d, rv %s -> %s",
				res, before, wc.n.Load(), beforeRecords, wc.records.Load(), n1.ResourceVersion, n2.ResourceVersion)
		}
		if c := strings.Count(fmt.Sprint(n2.Spec.Taints), "xid-gpu-lost"); c != 1 {
			t.Fatalf("taint present %d times: %v", c, n2.Spec.Taints)
		}
		// A replayed older firing and a new one change neither the Node nor the
		// taint's record (the evidence is the pipeline's record write, not act's).
		for _, at := range []time.Time{t0.Add(-time.Hour), t0.Add(time.Minute)} {
			if res, err := a.TaintNode(ctx, xidFault("idem-1", xid, at), "b"); err != nil || res.Changed || res.NewFault || len(res.Added) != 0 {
				t.Fatalf("firing at %s: %+v, %v", at, res, err)
			}
		}
		if wc.n.Load() != before || wc.records.Load() != beforeRecords {
			t.Fatalf("repeated firings wrote: node writes %d -> %d, record writes %d -> %d", before, wc.n.Load(), beforeRecords, wc.records.Load())
		}
		evs := recordedOn(t, a, "idem-1")
		if len(evs) != 1 || !evs[0].placed {
			t.Fatalf("recorded after new firing: %+v", evs)
		}
		if c := countReason(nodeEvents(t, cs, "idem-1", withReason(ReasonTainted)), ReasonTainted); c != 1 {
			// The recorder would have aggregated repeats into a count; there must be
			// a single FaultTainted Event with count 1.
			t.Fatalf("%d FaultTainted events", c)
		}
	})

	t.Run("AdmitAskedBeforeFencingAnew", func(t *testing.T) {
		createNodes(t, cs, "admit-1")
		a, wc := startActor(t, env.RESTConfig(), Options{})
		f := xidFault("admit-1", xid, t0)
		refused := errors.New("no budget")
		asked := 0
		before, beforeRecords := wc.n.Load(), wc.records.Load()
		_, err := a.PlaceTaint(ctx, f, "b", nodefault.Change{}, func() error { asked++; return refused })
		if !errors.Is(err, refused) || asked != 1 {
			t.Fatalf("refused admission: err %v, asked %d times, want the admission's error, asked once", err, asked)
		}
		if wc.n.Load() != before || wc.records.Load() != beforeRecords || hasTaint(getNode(t, cs, "admit-1"), "faultline.io/faulty=xid-gpu-lost:NoSchedule") {
			t.Fatalf("refused admission wrote: node writes %d -> %d, record writes %d -> %d",
				before, wc.n.Load(), beforeRecords, wc.records.Load())
		}
		pt, err := a.PlaceTaint(ctx, f, "b", nodefault.Change{}, func() error { asked++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pt.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		n := getNode(t, cs, "admit-1")
		if asked != 2 || !hasTaint(n, "faultline.io/faulty=xid-gpu-lost:NoSchedule") {
			t.Fatalf("admitted: asked %d times (want 2), taints %v", asked, n.Spec.Taints)
		}
		// The node carries the taint now: a refresh fences nothing anew, nothing is asked.
		waitCached(t, a, "admit-1", n.ResourceVersion)
		if _, err := a.PlaceTaint(ctx, f, "b", nodefault.Change{}, func() error { asked++; return refused }); err != nil || asked != 2 {
			t.Fatalf("refresh of a taint in place: err %v, asked %d times, want no error and no question", err, asked)
		}
	})

	t.Run("SettledOnceTheCacheShowsTheFence", func(t *testing.T) {
		createNodes(t, cs, "settle-1")
		a, _ := startActor(t, env.RESTConfig(), Options{})
		if !a.Settled(ctx, "settle-1") {
			t.Fatal("a node the Actor never wrote is not settled")
		}
		during := true
		a.beforeWrite = func(node string, _ int) { during = a.Settled(ctx, node) }
		_, err := a.TaintNode(ctx, xidFault("settle-1", xid, t0), "")
		a.beforeWrite = nil
		if err != nil {
			t.Fatal(err)
		}
		if during {
			t.Fatal("settled while its taint was being placed")
		}
		n := getNode(t, cs, "settle-1")
		if !a.cacheBehind("settle-1", "an older version") {
			t.Fatal("the Actor's write is not noted: a cache without it would count as settled")
		}
		waitCached(t, a, "settle-1", n.ResourceVersion)
		if !a.Settled(ctx, "settle-1") {
			t.Fatal("not settled once the cache shows the Actor's write")
		}
	})

	t.Run("RetriesOnConflict", func(t *testing.T) {
		createNodes(t, cs, "conflict-1", "conflict-2")
		a, _ := startActor(t, env.RESTConfig(), Options{})
		// Deterministic: another client changes the node between the Actor's read
		// and its write, on the first attempt.
		a.beforeWrite = func(node string, attempt int) {
			if attempt == 1 {
				updateNode(t, cs, node, func(n *corev1.Node) { n.Labels["other-writer"] = "was-here" })
			}
		}
		res, err := a.TaintNode(ctx, xidFault("conflict-1", xid, t0), "")
		if err != nil {
			t.Fatal(err)
		}
		if res.Attempts != 2 {
			t.Fatalf("attempts = %d, want 2 (one conflict)", res.Attempts)
		}
		n := getNode(t, cs, "conflict-1")
		if n.Labels["other-writer"] != "was-here" || !hasTaint(n, "faultline.io/faulty=xid-gpu-lost:NoSchedule") {
			t.Fatalf("lost an update: labels %v taints %v", n.Labels, n.Spec.Taints)
		}
		a.beforeWrite = nil

		// Another client places the very taint between the first attempt's read and
		// write: the retry finds it somebody else's, not one this call placed (the
		// first attempt had already marked it Placing), so it is never removed.
		createNodes(t, cs, "conflict-3")
		same := corev1.Taint{Key: rules.DefaultTaintKey, Value: "xid-gpu-lost", Effect: corev1.TaintEffectNoSchedule}
		a.beforeWrite = func(node string, attempt int) {
			if attempt == 1 {
				updateNode(t, cs, node, func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, same) })
			}
		}
		res, err = a.TaintNode(ctx, xidFault("conflict-3", xid, t0), "")
		a.beforeWrite = nil
		if err != nil || res.Attempts != 2 || len(res.Added) != 0 || res.Existing != taintString(same) {
			t.Fatalf("taint raced by an identical foreign taint: %+v, %v", res, err)
		}
		if evs := recordedOn(t, a, "conflict-3"); len(evs) != 1 || evs[0].placed {
			t.Fatalf("recorded %+v, want the foreign taint as existing", evs)
		}
		if err := a.Untaint(ctx, "conflict-3", "xid-gpu-lost"); err != nil {
			t.Fatal(err)
		}
		if n := getNode(t, cs, "conflict-3"); !hasTaint(n, taintString(same)) {
			t.Fatalf("Untaint removed the foreign taint: %v", n.Spec.Taints)
		}

		// Under load: four rules taint one node at once while another client keeps
		// updating its labels; nothing is lost. That client writes every few
		// milliseconds, far more often than any real writer of a Node, so a run of
		// ten conflicts (DefaultBackoff) happened on a loaded machine; what is checked
		// here is that retried writes lose nothing, so the retries are not the limit.
		a, _ = startActor(t, env.RESTConfig(), Options{Backoff: wait.Backoff{Steps: 100, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 0.5, Cap: 200 * time.Millisecond}})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var others atomic.Int64
		wg.Add(1)
		go func() {
			defer wg.Done()
			other, _ := kubernetes.NewForConfig(env.RESTConfig())
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n, err := other.CoreV1().Nodes().Get(ctx, "conflict-2", metav1.GetOptions{})
				if err != nil {
					continue
				}
				n.Labels["other-writer"] = fmt.Sprint(i)
				if _, err := other.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err == nil {
					others.Store(int64(i))
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		var attempts atomic.Int64
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r := rule("load", fmt.Sprintf("r%d", i), fmt.Sprintf("faultline.io/load-%d", i), "bad")
				res, err := a.TaintNode(ctx, xidFault("conflict-2", r, t0), "")
				attempts.Add(int64(res.Attempts))
				errs <- err
			}(i)
		}
		for i := 0; i < 4; i++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		close(stop)
		wg.Wait()
		n = getNode(t, cs, "conflict-2")
		evs := recordedOn(t, a, "conflict-2")
		if len(evs) != 4 {
			t.Fatalf("%d evidence entries, want 4: %+v", len(evs), evs)
		}
		for i := 0; i < 4; i++ {
			if !hasTaint(n, fmt.Sprintf("faultline.io/load-%d=bad:NoSchedule", i)) {
				t.Errorf("taint %d missing: %v", i, n.Spec.Taints)
			}
		}
		if n.Labels["other-writer"] != fmt.Sprint(others.Load()) {
			t.Errorf("other writer's last label %q, want %d", n.Labels["other-writer"], others.Load())
		}
		t.Logf("4 concurrent taints: %d write attempts in all; the other writer's last label: %d", attempts.Load(), others.Load())
	})

	t.Run("ReadsItsOwnWrites", func(t *testing.T) {
		// Taint and Untaint back to back, never waiting for the informer: a
		// decision must never rest on a cache that has not seen the Actor's own
		// last write.
		createNodes(t, cs, "rw-1")
		a, _ := startActor(t, env.RESTConfig(), Options{Condition: true})
		for i := 0; i < 25; i++ {
			res, err := a.TaintNode(ctx, xidFault("rw-1", xid, t0.Add(time.Duration(i)*time.Second)), "")
			if err != nil || len(res.Added) != 1 {
				t.Fatalf("round %d: Taint: %+v, %v", i, res, err)
			}
			res, err = a.UntaintNode(ctx, "rw-1", AllRules)
			if err != nil || len(res.Removed) != 1 || len(res.Cleared) != 1 {
				t.Fatalf("round %d: Untaint: %+v, %v", i, res, err)
			}
		}
		n := getNode(t, cs, "rw-1")
		if hasTaint(n, "faultline.io/faulty=xid-gpu-lost:NoSchedule") || n.Annotations[fault.AnnotationFaults] != "" || len(recordedOn(t, a, "rw-1")) != 0 {
			t.Fatalf("left: %v %q", n.Spec.Taints, n.Annotations[fault.AnnotationFaults])
		}
	})

	t.Run("RecordsReadFromTheCache", func(t *testing.T) {
		// A new fault on a quiet node reads no record from the API server: the
		// record is created Placing and set Placed (two writes), the Node
		// written once. A second fault on the same node right after, before the
		// informer can show the first's record, still plans on it.
		a, wc := startActor(t, env.RESTConfig(), Options{})
		other := rule("nvidia-xid", "xid-other", "faultline.io/other", "xid-other")
		for i := range 8 {
			node := fmt.Sprintf("cached-%d", i)
			createNodes(t, cs, node)
			eventually.NoError(t, 10*time.Second, node+" cached", func() error {
				_, err := a.Nodes().Get(node)
				return err
			})
			reads, records, writes := wc.recordReads.Load(), wc.records.Load(), wc.n.Load()
			if err := a.Taint(ctx, xidFault(node, xid, t0), ""); err != nil {
				t.Fatal(err)
			}
			if d := wc.recordReads.Load() - reads; d != 0 {
				t.Fatalf("%s: a new fault read %d records from the API server", node, d)
			}
			if dr, dn := wc.records.Load()-records, wc.n.Load()-writes; dr != 2 || dn != 1 {
				t.Fatalf("%s: a new fault took %d record writes and %d Node writes, want 2 and 1", node, dr, dn)
			}
			if err := a.Taint(ctx, xidFault(node, other, t0), ""); err != nil {
				t.Fatal(err)
			}
			n := getNode(t, cs, node)
			if !hasTaint(n, "faultline.io/faulty=xid-gpu-lost:NoSchedule") || !hasTaint(n, "faultline.io/other=xid-other:NoSchedule") {
				t.Fatalf("%s: taints %v", node, n.Spec.Taints)
			}
			evs := recordedOn(t, a, node)
			if len(evs) != 2 || !evs[0].placed || !evs[1].placed {
				t.Fatalf("%s: recorded %+v, want both faults Placed", node, evs)
			}
			if got := n.Annotations[fault.AnnotationFaults]; strings.Count(got, ",") != 1 {
				t.Fatalf("%s: pointer %q does not name both records", node, got)
			}
		}
	})

	t.Run("ForeignTaintsUntouched", func(t *testing.T) {
		createNodes(t, cs, "foreign-1", "foreign-2")
		foreign := []corev1.Taint{
			{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: rules.DefaultTaintKey, Value: "by-hand", Effect: corev1.TaintEffectNoExecute}, // our key, other effect
		}
		updateNode(t, cs, "foreign-1", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, foreign...) })
		before := getNode(t, cs, "foreign-1").Spec.Taints
		a, _ := startActor(t, env.RESTConfig(), Options{})
		if err := a.Taint(ctx, xidFault("foreign-1", xid, t0), ""); err != nil {
			t.Fatal(err)
		}
		n := getNode(t, cs, "foreign-1")
		if !reflect.DeepEqual(foreignTaints(t, a, n), before) {
			t.Fatalf("foreign taints changed by Taint: %v -> %v", before, foreignTaints(t, a, n))
		}
		if err := a.Untaint(ctx, "foreign-1", AllRules); err != nil {
			t.Fatal(err)
		}
		n = getNode(t, cs, "foreign-1")
		if !reflect.DeepEqual(n.Spec.Taints, before) {
			t.Fatalf("after Untaint taints %v, want exactly %v", n.Spec.Taints, before)
		}
		if _, ok := n.Annotations[fault.AnnotationFaults]; ok {
			t.Fatalf("pointer left: %s", n.Annotations[fault.AnnotationFaults])
		}

		// An identical taint somebody else placed: recorded, never claimed, never removed.
		same := corev1.Taint{Key: rules.DefaultTaintKey, Value: "xid-gpu-lost", Effect: corev1.TaintEffectNoSchedule}
		updateNode(t, cs, "foreign-2", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, same) })
		before = getNode(t, cs, "foreign-2").Spec.Taints
		res, err := a.TaintNode(ctx, xidFault("foreign-2", xid, t0), "")
		if err != nil || len(res.Added) != 0 || res.Existing != taintString(same) {
			t.Fatalf("Taint over an identical foreign taint: %+v, %v", res, err)
		}
		if evs := recordedOn(t, a, "foreign-2"); len(evs) != 1 || evs[0].placed {
			t.Fatalf("recorded %+v", evs)
		}
		if err := a.Untaint(ctx, "foreign-2", "xid-gpu-lost"); err != nil {
			t.Fatal(err)
		}
		if n = getNode(t, cs, "foreign-2"); !reflect.DeepEqual(n.Spec.Taints, before) {
			t.Fatalf("Untaint removed a taint it did not place: %v, want %v", n.Spec.Taints, before)
		}
	})

	t.Run("SameKeyOtherValue", func(t *testing.T) {
		// Two rules of one pack share the pack's key; values are the rule ids.
		createNodes(t, cs, "shared-1")
		a, _ := startActor(t, env.RESTConfig(), Options{})
		ra := rule("nvidia-xid", "xid-a", rules.DefaultTaintKey, "xid-a")
		rb := rule("nvidia-xid", "xid-b", rules.DefaultTaintKey, "xid-b")
		if err := a.Taint(ctx, xidFault("shared-1", ra, t0), ""); err != nil {
			t.Fatal(err)
		}
		res, err := a.TaintNode(ctx, xidFault("shared-1", rb, t0.Add(time.Second)), "")
		if err != nil || len(res.Added) != 0 || res.Existing != "faultline.io/faulty=xid-a:NoSchedule" || !res.Changed {
			t.Fatalf("second rule, same key: %+v, %v", res, err)
		}
		n := getNode(t, cs, "shared-1")
		if !hasTaint(n, "faultline.io/faulty=xid-a:NoSchedule") || hasTaint(n, "faultline.io/faulty=xid-b:NoSchedule") {
			t.Fatalf("taints %v", n.Spec.Taints)
		}
		if evs := recordedOn(t, a, "shared-1"); len(evs) != 2 || !evs[0].placed || evs[1].placed {
			t.Fatalf("recorded %+v", evs)
		}
		// Clearing xid-a keeps the taint for xid-b (now naming it); clearing xid-b removes it.
		res, err = a.UntaintNode(ctx, "shared-1", "nvidia-xid/xid-a")
		if err != nil || len(res.Removed) != 1 || len(res.Added) != 1 {
			t.Fatalf("untaint xid-a: %+v, %v", res, err)
		}
		n = getNode(t, cs, "shared-1")
		if !hasTaint(n, "faultline.io/faulty=xid-b:NoSchedule") || hasTaint(n, "faultline.io/faulty=xid-a:NoSchedule") {
			t.Fatalf("taints after clearing xid-a: %v", n.Spec.Taints)
		}
		if evs := recordedOn(t, a, "shared-1"); len(evs) != 1 || evs[0].rule != "xid-b" || !evs[0].placed {
			t.Fatalf("recorded %+v", evs)
		}
		if err := a.Untaint(ctx, "shared-1", "xid-b"); err != nil {
			t.Fatal(err)
		}
		n = getNode(t, cs, "shared-1")
		for _, tt := range n.Spec.Taints {
			if tt.Key == rules.DefaultTaintKey {
				t.Fatalf("taint left: %v", n.Spec.Taints)
			}
		}
		evts := nodeEvents(t, cs, "shared-1", func(e []corev1.Event) bool { return countReason(e, ReasonUntainted) >= 2 })
		if countReason(evts, ReasonUntainted) < 2 {
			t.Fatalf("events %+v", evts)
		}
	})

	t.Run("OptOut", func(t *testing.T) {
		createNodes(t, cs, "optout-1", "optout-2")
		updateNode(t, cs, "optout-1", func(n *corev1.Node) { n.Labels[fault.LabelOptOut] = "true" })
		n1 := getNode(t, cs, "optout-1")
		a, wc := startActor(t, env.RESTConfig(), Options{})
		waitCached(t, a, "optout-1", n1.ResourceVersion)
		err := a.Taint(ctx, xidFault("optout-1", xid, t0), "")
		var oo *OptedOutError
		if !errors.Is(err, ErrOptedOut) || !errors.As(err, &oo) || oo.Node != "optout-1" {
			t.Fatalf("Taint on an opted-out node: %v", err)
		}
		if n := getNode(t, cs, "optout-1"); n.ResourceVersion != n1.ResourceVersion || wc.n.Load() != 0 {
			t.Fatalf("opted-out node written (rv %s -> %s, %d writes)", n1.ResourceVersion, n.ResourceVersion, wc.n.Load())
		}
		nodeEvents(t, cs, "optout-1", withReason(ReasonOptedOut))
		if evts := nodeEvents(t, cs, "optout-1", withReason(ReasonOptedOut)); countReason(evts, ReasonOptedOut) != 1 {
			t.Fatalf("events %+v", evts)
		}
		facts, err := a.Facts()
		if err != nil || !facts.OptedOut["optout-1"] || facts.OptedOut["optout-2"] {
			t.Fatalf("facts %+v, %v", facts, err)
		}
		all, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if facts.Eligible != len(all.Items)-1 {
			t.Fatalf("%d eligible nodes; %d nodes, one opted out", facts.Eligible, len(all.Items))
		}
		// No Node changed: the same facts again, without a pass over the fleet.
		again, _ := a.Facts()
		if reflect.ValueOf(again.OptedOut).UnsafePointer() != reflect.ValueOf(facts.OptedOut).UnsafePointer() {
			t.Error("facts recomputed although no Node changed")
		}
		// A Node changes: the next facts show it.
		updateNode(t, cs, "optout-2", func(n *corev1.Node) { n.Labels[fault.LabelOptOut] = "true" })
		eventually.True(t, 10*time.Second, "facts with optout-2 opted out", func() bool {
			f, err := a.Facts()
			return err == nil && f.OptedOut["optout-2"] && f.Eligible == facts.Eligible-1
		})
	})

	t.Run("NodeCondition", func(t *testing.T) {
		createNodes(t, cs, "cond-1")
		a, _ := startActor(t, env.RESTConfig(), Options{Condition: true})
		cond := func() (*corev1.NodeCondition, *corev1.NodeCondition) {
			n := getNode(t, cs, "cond-1")
			var ours, ready *corev1.NodeCondition
			for i, c := range n.Status.Conditions {
				switch c.Type {
				case fault.ConditionType:
					ours = &n.Status.Conditions[i]
				case corev1.NodeReady:
					ready = &n.Status.Conditions[i]
				}
			}
			return ours, ready
		}
		res, err := a.TaintNode(ctx, xidFault("cond-1", xid, t0), "")
		if err != nil || !res.Condition {
			t.Fatalf("%+v, %v", res, err)
		}
		c, ready := cond()
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "xid-gpu-lost" || ready == nil || ready.Reason != "KubeletReady" {
			t.Fatalf("condition %+v, ready %+v", c, ready)
		}
		set := c.LastTransitionTime
		// Unchanged faults: no status write.
		waitCached(t, a, "cond-1", getNode(t, cs, "cond-1").ResourceVersion)
		if res, err := a.TaintNode(ctx, xidFault("cond-1", xid, t0), ""); err != nil || res.Condition || res.Changed {
			t.Fatalf("repeat: %+v, %v", res, err)
		}
		if err := a.Untaint(ctx, "cond-1", AllRules); err != nil {
			t.Fatal(err)
		}
		c, ready = cond()
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "NoFault" || ready == nil {
			t.Fatalf("after Untaint: condition %+v, ready %+v", c, ready)
		}
		if !c.LastTransitionTime.After(set.Time) && !c.LastTransitionTime.Equal(&set) {
			t.Fatalf("transition time went back")
		}
	})

	t.Run("CacheStripped", func(t *testing.T) { testCacheStripped(t, env.RESTConfig()) })
	t.Run("ListPaged", func(t *testing.T) { testListPaged(t, env.RESTConfig()) })

	t.Run("PointerBounded", func(t *testing.T) {
		createNodes(t, cs, "big-1")
		a, _ := startActor(t, env.RESTConfig(), Options{})
		for i := 0; i < 40; i++ {
			r := rule("big", fmt.Sprintf("rule-%02d-%s", i, strings.Repeat("r", 180)), rules.DefaultTaintKey, fmt.Sprintf("rule-%02d", i))
			if err := a.Taint(ctx, xidFault("big-1", r, t0.Add(time.Duration(i)*time.Second)), ""); err != nil {
				t.Fatal(err)
			}
		}
		n := getNode(t, cs, "big-1")
		v := n.Annotations[fault.AnnotationFaults]
		evs := recordedOn(t, a, "big-1")
		if len(v) > maxPointerBytes || len(evs) != 40 || !strings.HasPrefix(v, "big-1.big.rule-00-") {
			t.Fatalf("pointer annotation %d bytes, %d records", len(v), len(evs))
		}
		if !evs[0].placed || !hasTaint(n, "faultline.io/faulty=rule-00:NoSchedule") {
			t.Fatalf("ownership of the shared taint lost")
		}
		t.Logf("40 faults with long names -> pointer annotation %d bytes", len(v))
	})

	t.Run("ForgedAnnotationsNotTrusted", func(t *testing.T) {
		// The node carries faultline's taint and annotations claiming faultline placed
		// it (what a node's kubelet could write); no record says so.
		createNodes(t, cs, "forged-1")
		forged := corev1.Taint{Key: rules.DefaultTaintKey, Value: "xid-gpu-lost", Effect: corev1.TaintEffectNoSchedule}
		updateNode(t, cs, "forged-1", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, forged)
			n.Annotations = map[string]string{
				fault.AnnotationLegacyEvidence: `[{"rule":"xid-gpu-lost","pack":"nvidia-xid","taint":"faultline.io/faulty=xid-gpu-lost:NoSchedule","taintPlaced":true}]`,
				fault.AnnotationFaults:         nodefault.Name("forged-1", "nvidia-xid", "xid-gpu-lost"),
			}
		})
		a, _ := startActor(t, env.RESTConfig(), Options{})
		waitCached(t, a, "forged-1", getNode(t, cs, "forged-1").ResourceVersion)
		facts, err := a.Facts()
		if err != nil || len(facts.Tainted["forged-1"]) != 0 {
			t.Fatalf("facts count a taint no record owns: %+v, %v", facts.Tainted, err)
		}
		active, _ := a.ListActive()
		for _, nf := range active {
			if nf.Node == "forged-1" {
				t.Fatalf("ListActive lists forged-1: %+v", nf)
			}
		}
		res, err := a.UntaintNode(ctx, "forged-1", AllRules)
		if err != nil || len(res.Cleared) != 0 || len(res.Removed) != 0 || !hasTaint(getNode(t, cs, "forged-1"), taintString(forged)) {
			t.Fatalf("Untaint of a forged claim: %+v, %v", res, err)
		}
		// The rule fires: the taint is there, not faultline's (Existing), and
		// clearing the fault leaves it.
		res, err = a.TaintNode(ctx, xidFault("forged-1", xid, t0), "")
		if err != nil || len(res.Added) != 0 || res.Existing != taintString(forged) {
			t.Fatalf("Taint over the forged claim: %+v, %v", res, err)
		}
		if evs := recordedOn(t, a, "forged-1"); len(evs) != 1 || evs[0].placed {
			t.Fatalf("recorded %+v", evs)
		}
		if _, ok := getNode(t, cs, "forged-1").Annotations[fault.AnnotationLegacyEvidence]; ok {
			t.Fatal("the legacy annotation stays after faultline wrote the node")
		}
		if err := a.Untaint(ctx, "forged-1", AllRules); err != nil {
			t.Fatal(err)
		}
		if !hasTaint(getNode(t, cs, "forged-1"), taintString(forged)) {
			t.Fatal("Untaint removed the taint faultline did not place")
		}
	})

	t.Run("PlacingCheckedAgainstTheNode", func(t *testing.T) {
		// A writer stopped after the record said Placing: before the Node update
		// (place-1: no taint) and after it (place-2: the taint is there).
		createNodes(t, cs, "place-1", "place-2")
		want := corev1.Taint{Key: rules.DefaultTaintKey, Value: "xid-gpu-lost", Effect: corev1.TaintEffectNoSchedule}
		updateNode(t, cs, "place-2", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, want) })
		a, _ := startActor(t, env.RESTConfig(), Options{})
		for _, node := range []string{"place-1", "place-2"} {
			if err := a.writeTaint(ctx, node, claim{pack: xid.Pack, rule: xid.ID, taint: taintString(want)}, v1alpha1.TaintPlacing, xid); err != nil {
				t.Fatal(err)
			}
		}
		// The cache also holds the records of the other subtests: wait for these two.
		eventually.True(t, 10*time.Second, "both Placing records in the cache", func() bool {
			n := 0
			for _, nf := range a.faults.List() {
				if (nf.Spec.Node == "place-1" || nf.Spec.Node == "place-2") && nf.Status.Taint != nil && nf.Status.Taint.State == v1alpha1.TaintPlacing {
					n++
				}
			}
			return n == 2
		})
		if adopted, cleared, err := a.CheckPlacing(ctx, time.Hour); err != nil || len(adopted)+len(cleared) != 0 {
			t.Fatalf("young Placing records settled: %v %v %v", adopted, cleared, err)
		}
		adopted, cleared, err := a.CheckPlacing(ctx, 0)
		if err != nil || !slices.Contains(adopted, fault.Key("place-2", "nvidia-xid", "xid-gpu-lost")) ||
			!slices.Contains(cleared, fault.Key("place-1", "nvidia-xid", "xid-gpu-lost")) {
			t.Fatalf("CheckPlacing = %v, %v, %v", adopted, cleared, err)
		}
		if evs := recordedOn(t, a, "place-1"); len(evs) != 0 || hasTaint(getNode(t, cs, "place-1"), taintString(want)) {
			t.Fatalf("place-1: recorded %+v", evs)
		}
		if evs := recordedOn(t, a, "place-2"); len(evs) != 1 || !evs[0].placed {
			t.Fatalf("place-2: recorded %+v", evs)
		}
		// The adopted taint is faultline's: an untaint removes it.
		res, err := a.UntaintNode(ctx, "place-2", AllRules)
		if err != nil || len(res.Removed) != 1 || hasTaint(getNode(t, cs, "place-2"), taintString(want)) {
			t.Fatalf("Untaint of the adopted taint: %+v, %v", res, err)
		}
	})

	t.Run("FenceWithoutBooksTaintedEventOnce", func(t *testing.T) {
		// A leader stopped between the fence (record Placing, the Node tainted)
		// and the books, which post FaultTainted: the next one decides the line
		// again, finds the taint its own, and posts the Event; a second decision,
		// the books written, posts none.
		createNodes(t, cs, "books-1")
		want := corev1.Taint{Key: rules.DefaultTaintKey, Value: "xid-gpu-lost", Effect: corev1.TaintEffectNoSchedule}
		a, _ := startActor(t, env.RESTConfig(), Options{})
		if err := a.writeTaint(ctx, "books-1", claim{pack: xid.Pack, rule: xid.ID, taint: taintString(want)}, v1alpha1.TaintPlacing, xid); err != nil {
			t.Fatal(err)
		}
		updateNode(t, cs, "books-1", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, want) })
		eventually.True(t, 10*time.Second, "books-1 tainted in the cache", func() bool {
			n, err := a.Nodes().Get("books-1")
			return err == nil && hasTaint(n, taintString(want))
		})
		for i := range 2 {
			res, err := a.TaintNode(ctx, xidFault("books-1", xid, t0.Add(time.Duration(i)*time.Second)), "")
			if err != nil || len(res.Added) != 0 || res.Existing != "" || res.NewFault != (i == 0) {
				t.Fatalf("decision %d: %+v, %v", i, res, err)
			}
		}
		if evs := recordedOn(t, a, "books-1"); len(evs) != 1 || !evs[0].placed {
			t.Fatalf("recorded %+v", evs)
		}
		if n := countReason(nodeEvents(t, cs, "books-1", withReason(ReasonTainted)), ReasonTainted); n != 1 {
			t.Fatalf("%d FaultTainted Events, want 1", n)
		}
	})

	t.Run("EventsOnNodesAndObjects", func(t *testing.T) {
		createNodes(t, cs, "ev-1")
		a, _ := startActor(t, env.RESTConfig(), Options{})
		if err := a.Event(ctx, "ev-1", xidFault("ev-1", xid, t0), ReasonStormHold, "12 of 40 nodes faulted in 5m: holding taints"); err != nil {
			t.Fatal(err)
		}
		if err := a.Event(ctx, "no-such-node", fault.Fault{}, ReasonHeld, "x"); err == nil {
			t.Fatalf("Event on a missing node: no error")
		}
		evts := nodeEvents(t, cs, "ev-1", withReason(ReasonStormHold))
		if countReason(evts, ReasonStormHold) != 1 || evts[0].Type != corev1.EventTypeWarning || evts[0].InvolvedObject.UID == "" {
			t.Fatalf("events %+v", evts)
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faultline"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm, err := cs.CoreV1().ConfigMaps("faultline").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "packs"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.EventOn(cm, corev1.EventTypeWarning, ReasonPackReloadFailed, "90-site.yaml:12: bad regex; keeping the last good set"); err != nil {
			t.Fatal(err)
		}
		if err := a.EventOn(cm, "Bogus", ReasonPackReloadFailed, "x"); err == nil {
			t.Fatal("EventOn accepted a bad type")
		}
		eventually.NoError(t, 15*time.Second, "a PackReloadFailed event on the ConfigMap", func() error {
			l, err := cs.CoreV1().Events("faultline").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=packs"})
			if err != nil {
				return err
			}
			if len(l.Items) == 1 && l.Items[0].Reason == ReasonPackReloadFailed && l.Items[0].InvolvedObject.UID == cm.UID {
				return nil
			}
			return fmt.Errorf("events %+v", l.Items)
		})
	})
}

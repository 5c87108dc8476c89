package nodefault_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// recordRequests counts the record reads (not watches), the record writes (nil:
// not counted) and the conflicts a client gets.
type recordRequests struct {
	rt                       http.RoundTripper
	reads, conflicts, writes *atomic.Int64
}

func (c recordRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	records := strings.HasPrefix(r.URL.Path, "/apis/faultline.io/")
	if r.Method == http.MethodGet && records && r.URL.Query().Get("watch") != "true" {
		c.reads.Add(1)
	}
	if r.Method != http.MethodGet && records && c.writes != nil {
		c.writes.Add(1)
	}
	resp, err := c.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusConflict {
		c.conflicts.Add(1)
	}
	return resp, err
}

// storeAs returns a client on the apiserver's config changed by edit, and a Store
// with opts on it.
func storeAs(t *testing.T, env *testenv.Env, opts nodefault.Options, edit func(*rest.Config)) (kubernetes.Interface, *nodefault.Store) {
	t.Helper()
	cfg := rest.CopyConfig(env.RESTConfig())
	edit(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := nodefault.New(cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cs, st
}

// countingStore returns a Store with opts whose client counts its record reads and
// the conflicts it gets.
func countingStore(t *testing.T, env *testenv.Env, opts nodefault.Options) (st *nodefault.Store, reads, conflicts *atomic.Int64) {
	t.Helper()
	reads, conflicts = new(atomic.Int64), new(atomic.Int64)
	_, st = storeAs(t, env, opts, func(cfg *rest.Config) {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return recordRequests{rt, reads, conflicts, nil} }
	})
	return st, reads, conflicts
}

// useCache runs a NodeFault informer until ctx ends and has st read it once it has
// synced. The informer has a client of its own: its lists (a relist when a watch
// ends early, as on a CRD whose watch cache is still starting) are not the Store's
// reads, which the tests count.
func useCache(ctx context.Context, t *testing.T, env *testenv.Env, st *nodefault.Store) *nodefault.Cache {
	t.Helper()
	c, err := nodefault.NewCache(env.Clientset(), 0)
	if err != nil {
		t.Fatal(err)
	}
	go c.Run(ctx.Done())
	eventually.True(t, 10*time.Second, "cache synced", c.HasSynced)
	st.UseCache(c)
	return c
}

// TestRecordReadsTheCache: a Store on a synced cache reads no record from the API
// server, whether or not the cache shows its own last writes yet: a change written
// right after another builds on it, without a conflict, and a node's records read
// right after a write include it.
func TestRecordReadsTheCache(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	st, reads, conflicts := countingStore(t, env, nodefault.Options{Owner: "controller-0"})
	c := useCache(ctx, t, env, st)

	for i := range 20 {
		node := fmt.Sprintf("rt-%d", i)
		f := xidFault(node, time.Now())
		r0 := reads.Load()
		if _, err := st.Record(ctx, node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Fault: &f, Decision: "one"}); err != nil {
			t.Fatal(err)
		}
		if d := reads.Load() - r0; d != 0 {
			t.Fatalf("%s: a new record read %d times from the API server, want 0 (the cache shows it absent)", node, d)
		}
		if _, err := st.Record(ctx, node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Decision: "two"}); err != nil {
			t.Fatal(err)
		}
		l, err := st.ForNode(ctx, node, false)
		if err != nil || len(l) != 1 || historyKinds(l[0]) != "one,two" {
			got := ""
			if len(l) > 0 {
				got = historyKinds(l[0])
			}
			t.Fatalf("%s: records right after the writes: %v, %d records, history %q, want one record with one,two", node, err, len(l), got)
		}
		if d := reads.Load() - r0; d != 0 {
			t.Fatalf("%s: a change and a read right after a write read %d times from the API server, want 0 (the Store's own writes)", node, d)
		}
		// Once the cache shows the last write, a change reads nothing.
		eventually.NoError(t, 10*time.Second, node+" cached", func() error {
			if l := c.ForNode(node); len(l) != 1 || historyKinds(*l[0]) != "one,two" {
				return fmt.Errorf("cached: %d records", len(l))
			}
			return nil
		})
		r0 = reads.Load()
		nf, err := st.Record(ctx, node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Decision: "three"})
		if err != nil {
			t.Fatalf("%s: third change: %v", node, err)
		}
		if h := historyKinds(*nf); h != "one,two,three" {
			t.Fatalf("%s: history %q after the third change", node, h)
		}
		if d := reads.Load() - r0; d != 0 {
			t.Fatalf("%s: a change on a current cache read %d times from the API server", node, d)
		}
	}
	if n := conflicts.Load(); n != 0 {
		t.Errorf("%d conflicts: a write was planned on a cached copy older than the Store's own write", n)
	}
}

// TestCollectReadsTheCache: a Store on a synced cache picks the records to collect
// from it, with no read of the records from the API server, and a record reopened
// after the cache saw it resolved is kept (the delete's precondition).
func TestCollectReadsTheCache(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, reads, _ := countingStore(t, env, nodefault.Options{Owner: "controller-0", Retention: time.Hour, Now: clk.Now})
	other, err := nodefault.New(env.Clientset(), nodefault.Options{Owner: "controller-1", Retention: time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	c := useCache(ctx, t, env, st)

	resolve := func(node string) *v1alpha1.NodeFault {
		t.Helper()
		nf, err := st.Record(ctx, node, "nvidia-xid", "xid-79", nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint, Decision: "untaint"})
		if err != nil {
			t.Fatal(err)
		}
		return nf
	}
	expired, reopened := resolve("gc-1"), resolve("gc-2")
	open, err := st.Record(ctx, "gc-3", "nvidia-xid", "xid-79", nodefault.Change{Phase: v1alpha1.PhaseObserved, Cause: nodefault.CauseAnnotate})
	if err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "records cached", func() error {
		if n := len(c.List()); n != 3 {
			return fmt.Errorf("%d cached", n)
		}
		return nil
	})
	clk.Add(2 * time.Hour)
	// Reopened by another controller: the cache may still show it resolved.
	if _, err := other.Record(ctx, "gc-2", "nvidia-xid", "xid-79", nodefault.Change{Phase: v1alpha1.PhaseObserved, Cause: nodefault.CauseAnnotate}); err != nil {
		t.Fatal(err)
	}

	r0 := reads.Load()
	n, err := st.Collect(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Collect = %d, %v; want 1 (the expired record only)", n, err)
	}
	if d := reads.Load() - r0; d != 0 {
		t.Errorf("Collect read the records %d times from the API server, want 0 (the cache has them)", d)
	}
	if _, err := other.Get(ctx, expired.Name); !apierrors.IsNotFound(err) {
		t.Errorf("expired record after Collect: %v, want NotFound", err)
	}
	for _, nf := range []*v1alpha1.NodeFault{reopened, open} {
		if _, err := other.Get(ctx, nf.Name); err != nil {
			t.Errorf("%s after Collect: %v, want kept", nf.Name, err)
		}
	}
}

// TestOwnWritesOverALaggingCache: with a cache that shows none of the Store's writes
// (an informer stopped after its sync, as one that lags through a burst), the Store
// reads its own last writes instead of the API server; another writer's change it has
// not seen costs one conflict and a read, never a lost change; and where the cache
// shows a version of another writer's, the records are read from the API server.
func TestOwnWritesOverALaggingCache(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	st, reads, conflicts := countingStore(t, env, nodefault.Options{Owner: "controller-0"})
	other, err := nodefault.New(env.Clientset(), nodefault.Options{Owner: "controller-1"})
	if err != nil {
		t.Fatal(err)
	}
	forNode := func(node string) (string, int64) {
		t.Helper()
		r0 := reads.Load()
		l, err := st.ForNode(ctx, node, false)
		if err != nil || len(l) != 1 {
			t.Fatalf("%s: %d records, %v; want 1", node, len(l), err)
		}
		return historyKinds(l[0]), reads.Load() - r0
	}

	// A frozen cache: synced (empty), then stopped.
	frozenCtx, stop := context.WithCancel(ctx)
	useCache(frozenCtx, t, env, st)
	stop()
	f := xidFault("lag-1", time.Now())
	for _, d := range []string{"one", "two", "three"} {
		ch := nodefault.Change{Decision: d}
		if d == "one" {
			ch.Fault = &f
		}
		if _, err := st.Record(ctx, "lag-1", f.Rule.Pack, f.Rule.ID, ch); err != nil {
			t.Fatal(err)
		}
	}
	if h, n := forNode("lag-1"); h != "one,two,three" || n != 0 {
		t.Fatalf("records after three writes: history %q read %d times from the API server; want one,two,three and 0", h, n)
	}
	if n, c := reads.Load(), conflicts.Load(); n != 0 || c != 0 {
		t.Fatalf("three writes over a frozen cache: %d reads, %d conflicts; want none (each built on the Store's last write)", n, c)
	}
	// Another writer's change, unseen: the next write conflicts, reads, and keeps it.
	if _, err := other.Record(ctx, "lag-1", f.Rule.Pack, f.Rule.ID, nodefault.Change{Decision: "theirs"}); err != nil {
		t.Fatal(err)
	}
	nf, err := st.Record(ctx, "lag-1", f.Rule.Pack, f.Rule.ID, nodefault.Change{Decision: "four"})
	if err != nil {
		t.Fatal(err)
	}
	if h := historyKinds(*nf); h != "one,two,three,theirs,four" || conflicts.Load() != 1 {
		t.Fatalf("after another writer's change: history %q, %d conflicts; want one,two,three,theirs,four and 1", h, conflicts.Load())
	}

	// A live cache that shows another writer's version: read from the API server.
	c := useCache(ctx, t, env, st)
	g := xidFault("lag-2", time.Now())
	if _, err := st.Record(ctx, "lag-2", g.Rule.Pack, g.Rule.ID, nodefault.Change{Fault: &g, Decision: "one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Record(ctx, "lag-2", g.Rule.Pack, g.Rule.ID, nodefault.Change{Decision: "theirs"}); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "the other writer's change cached", func() error {
		if l := c.ForNode("lag-2"); len(l) != 1 || historyKinds(*l[0]) != "one,theirs" {
			return fmt.Errorf("cached: %d records", len(l))
		}
		return nil
	})
	if _, err := st.Record(ctx, "lag-2", g.Rule.Pack, g.Rule.ID, nodefault.Change{Decision: "two"}); err != nil {
		t.Fatal(err)
	}
	rc, err := v1alpha1.NewRESTClient(env.Clientset())
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Delete().AbsPath("/apis", v1alpha1.SchemeGroupVersion.Group, v1alpha1.SchemeGroupVersion.Version,
		v1alpha1.Resource, nodefault.Name("lag-2", g.Rule.Pack, g.Rule.ID)).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "the delete cached", func() error {
		if l := c.ForNode("lag-2"); len(l) != 0 {
			return fmt.Errorf("cached: %d records", len(l))
		}
		return nil
	})
	r0 := reads.Load()
	l, err := st.ForNode(ctx, "lag-2", false)
	if err != nil || len(l) != 0 || reads.Load()-r0 != 1 {
		t.Fatalf("records after another writer deleted the Store's last write: %d, %v, %d reads; want none, read once from the API server", len(l), err, reads.Load()-r0)
	}
}

// historyKinds is a record's history, its decisions' kinds joined by commas.
func historyKinds(nf v1alpha1.NodeFault) string {
	var kinds []string
	for _, d := range nf.Status.History {
		kinds = append(kinds, d.Kind)
	}
	return strings.Join(kinds, ",")
}

// TestOwnDeleteOverALaggingCache: after the Store deletes a record that a lagging
// cache still shows, the Store reads the record as absent: the node's records leave it
// out and a new fault of the same rule creates a record afresh, with no read from the
// API server and no write on the deleted one.
func TestOwnDeleteOverALaggingCache(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, reads, conflicts := countingStore(t, env, nodefault.Options{Owner: "controller-0", Retention: time.Hour, Now: clk.Now})
	// The cache shows the resolved record, then stops: it never shows the delete.
	frozenCtx, stop := context.WithCancel(ctx)
	c := useCache(frozenCtx, t, env, st)
	f := xidFault("gone-1", clk.Now())
	if _, err := st.Record(ctx, "gone-1", f.Rule.Pack, f.Rule.ID, nodefault.Change{Fault: &f, Decision: "one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Record(ctx, "gone-1", f.Rule.Pack, f.Rule.ID, nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint, Decision: "untaint"}); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "the resolved record cached", func() error {
		if l := c.ForNode("gone-1"); len(l) != 1 || l[0].Status.Phase != v1alpha1.PhaseResolved {
			return fmt.Errorf("cached: %d records", len(l))
		}
		return nil
	})
	stop()

	clk.Add(2 * time.Hour)
	if n, err := st.Collect(ctx); err != nil || n != 1 {
		t.Fatalf("Collect = %d, %v; want 1", n, err)
	}
	if l := c.ForNode("gone-1"); len(l) != 1 {
		t.Fatalf("the stopped cache shows %d records of gone-1, want the deleted one still", len(l))
	}
	r0 := reads.Load()
	l, err := st.ForNode(ctx, "gone-1", false)
	if err != nil || len(l) != 0 {
		t.Fatalf("records after the Store deleted its last one: %d, %v; want none", len(l), err)
	}
	g := xidFault("gone-1", clk.Now())
	nf, err := st.Record(ctx, "gone-1", g.Rule.Pack, g.Rule.ID, nodefault.Change{Fault: &g, Decision: "again"})
	if err != nil {
		t.Fatalf("a new fault after the delete: %v", err)
	}
	if h := historyKinds(*nf); h != "again" || nf.Status.Phase == v1alpha1.PhaseResolved {
		t.Errorf("the new record: history %q, phase %s; want a record afresh with history again", h, nf.Status.Phase)
	}
	if d, n := reads.Load()-r0, conflicts.Load(); d != 0 || n != 0 {
		t.Errorf("after the Store's own delete: %d reads from the API server, %d conflicts; want none", d, n)
	}
}

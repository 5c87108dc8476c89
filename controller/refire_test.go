package controller_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

// watchGate holds back what the API server's watches send while it is shut: the
// informers of a client through it keep the objects as they were, as a cache that
// lags behind the API server's writes does.
type watchGate struct {
	next http.RoundTripper
	mu   sync.Mutex
	shut chan struct{} // nil while open
}

func (g *watchGate) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err == nil && req.URL.Query().Get("watch") == "true" {
		resp.Body = gatedBody{ReadCloser: resp.Body, g: g}
	}
	return resp, err
}

func (g *watchGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut == nil {
		g.shut = make(chan struct{})
	}
}

func (g *watchGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

// gatedBody hands on what it read only while its gate is open: bytes that arrive
// while it is shut wait for it to open.
type gatedBody struct {
	io.ReadCloser
	g *watchGate
}

func (b gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.g.mu.Lock()
	shut := b.g.shut
	b.g.mu.Unlock()
	if shut != nil {
		<-shut
	}
	return n, err
}

// TestRefiringAfterUntaintTakesBudget: a fault fires again on a node just
// untainted, while the controller's caches still show the old taint. The decision
// made on them ("already tainted") must not put the taint back outside the budget:
// carrying it out finds the node without the taint, and the fault is decided again
// as a new taint, which takes the budget. With a budget of one node and another
// node's fault held, never more than one node is tainted.
func TestRefiringAfterUntaintTakesBudget(t *testing.T) {
	cl := newCluster(t, "gpu-0", "gpu-1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	tw := watchTaints(ctx, t, cl, nil)
	defer tw.stop()

	gate := &watchGate{}
	defer gate.open()
	cfg := cl.env.RESTConfig()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate }
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := cl.start(options{decide: decide.Config{MaxPercent: 100, MaxNodes: 1, DisableStorm: true}, client: client})
	count := func(kind decide.Kind) float64 {
		return testutil.ToFloat64(r.m.Decisions().WithLabelValues(string(kind), "ok", string(rules.ModeEnforce)))
	}
	cl.push("gpu-0", time.Now(), xid79)
	cl.waitFor("gpu-0 tainted", 30*time.Second, func() bool { return cl.tainted("gpu-0") })
	cl.push("gpu-1", time.Now(), xid79)
	cl.waitFor("gpu-1's fault held: the budget is used", 30*time.Second, func() bool {
		return testutil.ToFloat64(r.m.Decisions().WithLabelValues("hold-"+string(decide.ReasonBudget), "ok", string(rules.ModeEnforce))) == 1
	})
	time.Sleep(time.Second) // the controller's caches see gpu-0's taint and record

	// From here the controller's caches keep gpu-0 tainted.
	gate.close()
	if _, err := r.c.Untaint(ctx, "gpu-0", "", "untainted by the test"); err != nil {
		t.Fatal(err)
	}
	if cl.tainted("gpu-0") {
		t.Fatal("gpu-0 still tainted after its untaint")
	}
	cl.push("gpu-0", time.Now(), xid79)
	cl.waitFor("gpu-0 tainted again by its new fault, the decision reported", 30*time.Second, func() bool {
		return cl.tainted("gpu-0") && count(decide.KindTaint)+count(decide.KindAlreadyTainted) >= 2
	})
	if n := count(decide.KindTaint); n != 2 {
		t.Errorf("%v taint decisions, want 2: the fault that fired again was not decided as a new taint", n)
	}
	if n := count(decide.KindAlreadyTainted); n != 0 {
		t.Errorf("%v already-tainted decisions carried out, want 0: the taint was put back outside the budget", n)
	}

	// The caches catch up; reconcile passes go on with gpu-1's fault held.
	gate.open()
	time.Sleep(2 * time.Second)
	if cl.tainted("gpu-1") {
		t.Error("gpu-1 tainted: two nodes tainted with a budget of one")
	}
	if most := tw.most(); most != 1 {
		t.Errorf("at most %d nodes tainted at once, want 1 (budget 1)", most)
	}
}

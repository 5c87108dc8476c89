package controller_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/logstream"
)

// stallNodeWrites passes every request on, except Node writes: those wait until the
// request is cancelled, and each such write is announced on stalled.
type stallNodeWrites struct {
	next    http.RoundTripper
	stalled chan<- string
}

func (s stallNodeWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/api/v1/nodes/") {
		select {
		case s.stalled <- req.URL.Path:
		default:
		}
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.next.RoundTrip(req)
}

// TestCancelledDecisionIsRetried: the leader stops while the taint of an Xid 79 is
// being written. Meanwhile it reads on (later lines of another node, fully decided)
// and saves its position several times: the position stays before the stalled line
// all the same, and the next leader reads it again and taints the node.
func TestCancelledDecisionIsRetried(t *testing.T) {
	cl := newCluster(t, "gpu-0", "gpu-1")
	stalled := make(chan string, 1)
	cfg := cl.env.RESTConfig()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return stallNodeWrites{next: rt, stalled: stalled} }
	stuck, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc := decide.Config{MaxPercent: 100, DisableStorm: true}
	a := cl.start(options{identity: "replica-a", decide: dc, client: stuck})
	cl.push("gpu-0", time.Now(), xid79)
	select {
	case p := <-stalled:
		t.Logf("write stalled: %s", p)
	case <-time.After(30 * time.Second):
		t.Fatal("the leader never wrote gpu-0")
	}
	cl.push("gpu-1", time.Now(), linkFlap(1)...) // one flap: read, decided, no write
	cl.waitFor("the lines after the stalled one read", 20*time.Second, func() bool {
		return testutil.ToFloat64(a.m.LinesRead().WithLabelValues(logstream.SourceKernel)) >= 3
	})
	time.Sleep(time.Second) // several saves of the position
	a.Stop(t)
	if cl.tainted("gpu-0") {
		t.Fatal("gpu-0 tainted through a stalled write")
	}
	cl.start(options{identity: "replica-b", decide: dc})
	cl.waitFor("gpu-0 tainted by the next leader", 30*time.Second, func() bool { return cl.tainted("gpu-0") })
}

// TestFailoverKeepsWindows: two link flaps are read by one leader, the third by the
// next: the next leader reads the rules' horizon before the saved position again
// (deciding nothing on it), so the flap's window spans the fail-over and the third
// flap taints, as it would have with one leader.
func TestFailoverKeepsWindows(t *testing.T) {
	cl := newCluster(t, "gpu-0", "gpu-1")
	dc := decide.Config{MaxPercent: 100, DisableStorm: true}
	a := cl.start(options{identity: "replica-a", decide: dc})
	cl.push("gpu-0", time.Now(), linkFlap(2)...)
	cl.waitFor("the first two flaps read", 20*time.Second, func() bool {
		return testutil.ToFloat64(a.m.LinesRead().WithLabelValues(logstream.SourceKernel)) >= 4
	})
	time.Sleep(time.Second) // several saves of the position
	a.Stop(t)
	if cl.tainted("gpu-0") {
		t.Fatal("gpu-0 tainted after two flaps")
	}
	b := cl.start(options{identity: "replica-b", decide: dc})
	cl.push("gpu-0", time.Now(), linkFlap(1)...)
	cl.waitFor("gpu-0 tainted by the third flap, read by the next leader", 30*time.Second, func() bool { return cl.tainted("gpu-0") })
	if n := testutil.ToFloat64(b.m.WarmLines().WithLabelValues("ok")); n != 4 {
		t.Errorf("the next leader read %v lines again before its position, want the 4 of the first two flaps", n)
	}
}

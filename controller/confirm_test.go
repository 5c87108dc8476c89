package controller_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
)

// TestConfirmationSurvivesLeaderChange: the leader stops while the confirming probe
// of an AER fault on gpu-a is running (its agent never answers). The next leader finds
// the confirmation in flight in gpu-a's NodeFault and runs it against gpu-a's agent,
// whose PCIe bandwidth check fails: gpu-a is held for the budget (of 1, taken by gpu-c)
// beside gpu-d, a fault the old leader held.
func TestConfirmationSurvivesLeaderChange(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	hang, asked := hangingAgent(t)
	phase := cl.phase

	dc := decide.Config{MaxNodes: 1, MaxPercent: 100, DisableStorm: true}
	stuck := s.probeConfig()
	stuck.AgentURLs = map[string]string{"gpu-a": hang, "gpu-b": hang}
	a := cl.start(options{identity: "replica-a", decide: dc, probes: stuck})
	// A held fault beside the confirmation: gpu-c takes the budget of 1, gpu-d waits.
	cl.push("gpu-c", time.Now(), xid79)
	cl.waitFor("gpu-c tainted", 30*time.Second, func() bool { return cl.tainted("gpu-c") })
	cl.push("gpu-d", time.Now(), xid79)
	cl.waitFor("gpu-d held", 30*time.Second, func() bool { return phase("gpu-d", "nvidia-xid", xid79Rule) == v1alpha1.PhaseHeld })
	cl.push("gpu-a", time.Now(), aerNonFatal)
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("no confirming probe reached gpu-a's agent")
	}
	time.Sleep(time.Second) // the saved read position passes the lines
	a.Stop(t)
	if cl.tainted("gpu-a") {
		t.Fatal("gpu-a tainted before its probe answered")
	}

	// The budget of 1 stays taken by gpu-c: the resumed confirmation fails and holds
	// gpu-a beside gpu-d.
	if nf, err := cl.record("gpu-a", "pcie-aer", aerRule); err == nil {
		t.Logf("gpu-a's record at the takeover: %s %+v %+v", nf.Status.Phase, nf.Status.History, nf.Status.Probes)
	}
	b := cl.start(options{identity: "replica-b", decide: dc, probes: s.probeConfig()})
	cl.waitFor("gpu-a's confirmation completed by the new leader", 90*time.Second, func() bool {
		return cl.confirmFailedThenHeld("gpu-a", "replica-b")
	})
	cl.waitFor("gpu-a and gpu-d held by the new leader", 20*time.Second, func() bool {
		return testutil.ToFloat64(b.m.Held().WithLabelValues("budget")) == 2
	})
	if phase("gpu-d", "nvidia-xid", xid79Rule) != v1alpha1.PhaseHeld || cl.tainted("gpu-a") || cl.tainted("gpu-d") {
		t.Errorf("after the takeover: gpu-d %s, gpu-a tainted %v, gpu-d tainted %v",
			phase("gpu-d", "nvidia-xid", xid79Rule), cl.tainted("gpu-a"), cl.tainted("gpu-d"))
	}
}

// aerRule is the rule of the default packs that aerNonFatal fires (action: probe).
const aerRule = "aer-nonfatal"

// hangingAgent is a probe agent that never answers: a confirmation sent to it stays
// in flight. asked receives once a request arrived.
func hangingAgent(t *testing.T) (url string, asked <-chan struct{}) {
	ch := make(chan struct{}, 1)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ch <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	t.Cleanup(func() { hang.CloseClientConnections(); hang.Close() })
	return hang.URL, ch
}

// confirmFailedThenHeld says whether the confirmation of node's AER fault failed and
// left the fault held for the budget, as recorded by owner.
func (cl *cluster) confirmFailedThenHeld(node, owner string) bool {
	nf, err := cl.record(node, "pcie-aer", aerRule)
	if err != nil {
		return false
	}
	for _, v := range nf.Status.Probes {
		if v.Purpose == "confirm" && v.Verdict == "failed" {
			return nf.Status.Owner == owner && nf.Status.Phase == v1alpha1.PhaseHeld
		}
	}
	return false
}

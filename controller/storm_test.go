package controller_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// TestStormSurvivesLeaderChange: Xid 79 on 3 of 10 nodes is a storm (more than 20 %);
// its faults are held. The leader stops; the next one still holds them as a storm
// (without the saved state it would see no storm and taint them all). An operator
// releases the storm there: its held faults are tainted. After another leader change
// the release stands: a fourth node's fault within the window is tainted at once,
// where a storm that came back unreleased would hold it.
func TestStormSurvivesLeaderChange(t *testing.T) {
	nodes := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7", "gpu-8", "gpu-9"}
	cl := newCluster(t, nodes...)
	dc := decide.Config{MaxPercent: 100, StormShare: 0.2, StormMinNodes: 3, StormWindow: 10 * time.Minute}
	const rule = "nvidia-xid/" + xid79Rule
	token := cl.operator()
	// What a replica says of the storm: its gauge faultline_controller_storms.
	storm := func(r *running) bool { return testutil.ToFloat64(r.m.Storms().WithLabelValues(rule)) == 1 }
	held := func(node string) bool { return cl.phase(node, "nvidia-xid", xid79Rule) == v1alpha1.PhaseHeld }

	a := cl.start(options{identity: "replica-a", decide: dc})
	for _, n := range nodes[:3] {
		cl.push(n, time.Now(), xid79)
	}
	cl.waitFor("the third node's fault held by the storm", 30*time.Second, func() bool { return held("gpu-2") })
	cl.waitFor("replica-a's gauge reports the storm", 10*time.Second, func() bool { return storm(a) })
	a.Stop(t)

	b := cl.start(options{identity: "replica-b", decide: dc})
	cl.waitFor("replica-b reports the storm and its held fault", 20*time.Second, func() bool {
		return storm(b) && slices.Contains(cl.heldFaults(), "gpu-2 "+rule+" "+string(decide.ReasonStorm)) &&
			testutil.ToFloat64(b.m.Held().WithLabelValues(string(decide.ReasonStorm))) >= 1
	})
	if storm(a) {
		t.Error("replica-a, no longer leading, still reports the storm")
	}
	time.Sleep(time.Second) // reconcile passes: the storm keeps holding
	if cl.tainted("gpu-2") {
		t.Fatal("the new leader tainted a fault the storm holds")
	}

	// The operator releases the storm: a request on a fault the storm holds.
	if a := cl.request(token, nodefault.Name("gpu-2", "nvidia-xid", xid79Rule), v1alpha1.RequestReleaseStorm); a.Result != v1alpha1.RequestDone {
		t.Fatalf("release the storm: %+v", a)
	}
	cl.waitFor("the released storm's held fault tainted", 30*time.Second, func() bool { return cl.tainted("gpu-2") })
	b.Stop(t)

	c := cl.start(options{identity: "replica-c", decide: dc})
	cl.push("gpu-3", time.Now(), xid79)
	cl.waitFor("gpu-3 tainted: the release stands", 30*time.Second, func() bool { return cl.tainted("gpu-3") })
	if storm(c) {
		t.Error("replica-c reports the released storm as holding")
	}
}

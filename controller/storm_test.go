package controller_test

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
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
	api := func(r *running) string {
		srv := httptest.NewServer(r.c.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	held := func(node string) bool { return cl.phase(node, "nvidia-xid", xid79Rule) == v1alpha1.PhaseHeld }

	a := cl.start(options{identity: "replica-a", decide: dc})
	for _, n := range nodes[:3] {
		cl.push(n, time.Now(), xid79)
	}
	cl.waitFor("the third node's fault held by the storm", 30*time.Second, func() bool { return held("gpu-2") })
	urlA := api(a)
	f, err := faults(urlA, token)
	if err != nil || !slices.Contains(f.Storms, rule) {
		t.Fatalf("replica-a: storms %v, %v", f.Storms, err)
	}
	a.Stop(t)

	b := cl.start(options{identity: "replica-b", decide: dc})
	urlB := api(b)
	cl.waitFor("replica-b reports the storm and its held fault", 20*time.Second, func() bool {
		f, err = faults(urlB, token)
		return err == nil && slices.Contains(f.Storms, rule) && slices.ContainsFunc(f.Held, func(h controller.HeldView) bool {
			return h.Node == "gpu-2" && h.Reason == string(decide.ReasonStorm)
		})
	})
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
	if f, err := faults(api(c), token); err != nil || slices.Contains(f.Storms, rule) {
		t.Errorf("replica-c: storms %v, %v; want the released storm not holding", f.Storms, err)
	}
}

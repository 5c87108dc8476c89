package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

const rackLabel = "topology.kubernetes.io/rack"

// TestFleetFault: link flaps on the 6 nodes of rack A raise one fleet fault (a
// NodeFault of scope Fleet listing them, an Event, the gauge); from the third node
// on their taints are held with reason fleet, so rack A does not lose six nodes. One
// node of rack B with the same flaps is a node fault, tainted as before. An
// operator's release taints the held rack-A nodes.
func TestFleetFault(t *testing.T) {
	cl := newCluster(t)
	var rackA []string
	for i := range 6 {
		rackA = append(rackA, fmt.Sprintf("a-%d", i))
	}
	rackB := []string{"b-0", "b-1", "b-2", "b-3"}
	for _, n := range append(slices.Clone(rackA), rackB...) {
		rack := n[:1]
		if _, err := cl.cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n,
			Labels: map[string]string{"nvidia.com/gpu.present": "true", rackLabel: rack}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dc := decide.Config{MaxPercent: 100, DisableStorm: true,
		Fleet: decide.FleetConfig{Labels: []string{rackLabel, "topology.kubernetes.io/zone"}, MinNodes: 3}}
	r := cl.start(options{decide: dc})
	now := time.Now()
	for _, n := range append(slices.Clone(rackA), "b-0") {
		cl.push(n, now, linkFlap(3)...)
	}

	group := v1alpha1.FleetGroup{Label: rackLabel, Value: "a"}
	name := nodefault.FleetName(group, "network")
	store, err := nodefault.New(cl.cs, nodefault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var fleet *v1alpha1.NodeFault
	cl.waitFor("one fleet fault for rack A listing its six nodes", 30*time.Second, func() bool {
		fleet, err = store.Get(context.Background(), name)
		return err == nil && slices.Equal(fleet.Status.Members, rackA)
	})
	if fleet.Spec.Scope != v1alpha1.ScopeFleet || fleet.Spec.Group == nil || *fleet.Spec.Group != group ||
		fleet.Spec.Rule != nodefault.FleetRule || fleet.Status.Phase != v1alpha1.PhaseHeld || fleet.Status.Reason != "fleet" {
		t.Errorf("fleet fault spec %+v, phase %s (%s)", fleet.Spec, fleet.Status.Phase, fleet.Status.Reason)
	}
	cl.waitFor("b-0 tainted: a node fault as before", 30*time.Second, func() bool { return cl.tainted("b-0") })
	cl.waitFor("four of rack A held with reason fleet", 30*time.Second, func() bool {
		held := 0
		for _, n := range rackA {
			if nf, err := cl.record(n, "network", "link-flap"); err == nil && nf.Status.Phase == v1alpha1.PhaseHeld && nf.Status.Reason == "fleet" {
				held++
			}
		}
		return held == 4
	})
	time.Sleep(time.Second) // reconcile passes: the fleet fault keeps holding
	tainted := 0
	for _, n := range rackA {
		if cl.tainted(n) {
			tainted++
		}
	}
	if tainted != 2 {
		t.Errorf("%d nodes of rack A tainted, want the 2 before the fleet fault was raised", tainted)
	}
	if got := testutil.ToFloat64(r.m.FleetFaults().WithLabelValues(rackLabel, "network")); got != 1 {
		t.Errorf("fleet fault gauge %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.m.Held().WithLabelValues("fleet")); got != 4 {
		t.Errorf("held{reason=fleet} %v, want 4", got)
	}
	if ev := cl.events(name, "FleetFault"); len(ev) == 0 {
		t.Error("no FleetFault Event on the fleet fault's record")
	}
	if nf, err := store.Get(context.Background(), nodefault.FleetName(v1alpha1.FleetGroup{Label: rackLabel, Value: "b"}, "network")); err == nil {
		t.Errorf("a fleet fault for rack B: %+v", nf.Spec)
	}

	// The operator releases the fleet fault: the held rack-A nodes are tainted.
	srv := httptest.NewServer(r.c.Handler())
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/fleet/"+name+"/release", nil)
	req.Header.Set("Authorization", "Bearer "+cl.operator())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("release: %s", resp.Status)
	}
	cl.waitFor("all of rack A tainted after the release", 30*time.Second, func() bool {
		for _, n := range rackA {
			if !cl.tainted(n) {
				return false
			}
		}
		return true
	})
	cl.waitFor("the fleet fault resolved as released", 10*time.Second, func() bool {
		fleet, err = store.Get(context.Background(), name)
		return err == nil && fleet.Status.Phase == v1alpha1.PhaseResolved && fleet.Status.Reason == "released"
	})
	if got := testutil.ToFloat64(r.m.FleetFaults().WithLabelValues(rackLabel, "network")); got != 0 {
		t.Errorf("fleet fault gauge %v after the release, want 0", got)
	}
}

package controller_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/test/testenv"
)

const rackLabel = "topology.kubernetes.io/rack"

// rackCluster starts a cluster with the 6 nodes of rack A (a-0..a-5) and the 4 of
// rack B, and the decide config of fleet correlation by rack.
func rackCluster(t *testing.T) (*cluster, []string, decide.Config) {
	t.Helper()
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
	return cl, rackA, dc
}

// heldByFleet counts the nodes whose link-flap NodeFault is held with reason fleet.
func heldByFleet(cl *cluster, nodes []string) int {
	held := 0
	for _, n := range nodes {
		if nf, err := cl.record(n, "network", "link-flap"); err == nil && nf.Status.Phase == v1alpha1.PhaseHeld && nf.Status.Reason == "fleet" {
			held++
		}
	}
	return held
}

// verdict gives the fleet fault name an operator's verdict (a request on its
// NodeFault) and checks the controller carried it out.
func verdict(t *testing.T, cl *cluster, name string, action v1alpha1.RequestAction) {
	t.Helper()
	if a := cl.request(cl.operator(), name, action); a.Result != v1alpha1.RequestDone {
		t.Fatalf("%s: %+v", action, a)
	}
}

// TestFleetFault: link flaps on the 6 nodes of rack A raise one fleet fault (a
// NodeFault of scope Fleet listing them, an Event, the gauge); from the third node
// on their taints are held with reason fleet, so rack A does not lose six nodes. One
// node of rack B with the same flaps is a node fault, tainted as before. An
// operator's release taints the held rack-A nodes.
func TestFleetFault(t *testing.T) {
	cl, rackA, dc := rackCluster(t)
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
		fleet.Spec.Rule != "link-flap" || fleet.Spec.Severity != "critical" || fleet.Status.Mode != "enforce" ||
		fleet.Status.Phase != v1alpha1.PhaseHeld || fleet.Status.Reason != "fleet" {
		t.Errorf("fleet fault spec %+v, mode %s, phase %s (%s)", fleet.Spec, fleet.Status.Mode, fleet.Status.Phase, fleet.Status.Reason)
	}
	cl.waitFor("b-0 tainted: a node fault as before", 30*time.Second, func() bool { return cl.tainted("b-0") })
	cl.waitFor("four of rack A held with reason fleet", 30*time.Second, func() bool { return heldByFleet(cl, rackA) == 4 })
	count := func() int {
		n := 0
		for _, node := range rackA {
			if cl.tainted(node) {
				n++
			}
		}
		return n
	}
	// The taints are carried out on the workers, after their decisions.
	cl.waitFor("two of rack A tainted", 30*time.Second, func() bool { return count() >= 2 })
	time.Sleep(time.Second) // reconcile passes: the fleet fault keeps holding
	if tainted := count(); tainted != 2 {
		t.Errorf("%d nodes of rack A tainted, want the 2 before the fleet fault was raised", tainted)
	}
	if got := testutil.ToFloat64(r.m.FleetFaults().WithLabelValues(rackLabel, "network")); got != 1 {
		t.Errorf("fleet fault gauge %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.m.Held().WithLabelValues("fleet")); got != 4 {
		t.Errorf("held{reason=fleet} %v, want 4", got)
	}
	cl.waitFor("a FleetFault Event on the fleet fault's record", 10*time.Second, func() bool {
		return len(cl.events(name, "FleetFault")) > 0
	})
	// kubectl get nodefaults lists the fleet fault beside the node faults.
	out, err := exec.Command(testenv.Binary(t, "kubectl"), "--kubeconfig", cl.env.Kubeconfig(), "get", "nodefaults", "-o", "wide").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl: %v\n%s", err, out)
	}
	t.Logf("kubectl get nodefaults -o wide:\n%s", out)
	if !slices.ContainsFunc(strings.Split(string(out), "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 7 && f[0] == name && f[1] == rackLabel+"=a" && f[2] == "Fleet" && f[3] == "link-flap" && f[4] == "network" &&
			f[5] == "critical" && f[6] == "enforce" && slices.Contains(f, "Held")
	}) {
		t.Errorf("no fleet fault row (node %s=a, scope Fleet, rule link-flap, pack network, critical, enforce, Held) in:\n%s", rackLabel, out)
	}
	if nf, err := store.Get(context.Background(), nodefault.FleetName(v1alpha1.FleetGroup{Label: rackLabel, Value: "b"}, "network")); err == nil {
		t.Errorf("a fleet fault for rack B: %+v", nf.Spec)
	}

	// The operator releases the fleet fault: the held rack-A nodes are tainted.
	verdict(t, cl, name, v1alpha1.RequestRelease)
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

// TestFleetFaultSurvivesLeaderChange: the fleet fault raised by one leader keeps
// holding on the next (its state is saved with the read position); dismissing it
// there resolves the held faults without a taint.
func TestFleetFaultSurvivesLeaderChange(t *testing.T) {
	cl, rackA, dc := rackCluster(t)
	a := cl.start(options{identity: "replica-a", decide: dc})
	for _, n := range rackA {
		cl.push(n, time.Now(), linkFlap(3)...)
	}
	cl.waitFor("four of rack A held with reason fleet", 30*time.Second, func() bool { return heldByFleet(cl, rackA) == 4 })
	a.Stop(t)

	b := cl.start(options{identity: "replica-b", decide: dc})
	cl.waitFor("replica-b holds the fleet fault", 20*time.Second, func() bool {
		return testutil.ToFloat64(b.m.FleetFaults().WithLabelValues(rackLabel, "network")) == 1 &&
			testutil.ToFloat64(b.m.Held().WithLabelValues("fleet")) == 4
	})
	time.Sleep(time.Second) // reconcile passes on the new leader
	tainted := 0
	for _, n := range rackA {
		if cl.tainted(n) {
			tainted++
		}
	}
	if tainted != 2 {
		t.Fatalf("%d nodes of rack A tainted after the leader change, want 2", tainted)
	}

	name := nodefault.FleetName(v1alpha1.FleetGroup{Label: rackLabel, Value: "a"}, "network")
	verdict(t, cl, name, v1alpha1.RequestDismiss)
	cl.waitFor("the held faults resolved as dismissed", 20*time.Second, func() bool {
		n := 0
		for _, node := range rackA {
			if nf, err := cl.record(node, "network", "link-flap"); err == nil && nf.Status.Phase == v1alpha1.PhaseResolved && nf.Status.Reason == "dismissed" {
				n++
			}
		}
		return n == 4
	})
	time.Sleep(time.Second)
	tainted = 0
	for _, n := range rackA {
		if cl.tainted(n) {
			tainted++
		}
	}
	if tainted != 2 {
		t.Errorf("%d nodes of rack A tainted after the dismissal, want still 2", tainted)
	}
	if got := testutil.ToFloat64(b.m.Held().WithLabelValues("fleet")); got != 0 {
		t.Errorf("held{reason=fleet} %v after the dismissal, want 0", got)
	}
}

// TestFleetFaultDryRun: in dry-run the fleet fault of rack A is reported as the one
// that would be raised — an Event on the controller's Pod, a log line, the
// decisions counter labelled dry-run-fleet-fault — and its members' decisions as
// dry-run holds; no fleet fault record is written, nothing is held or tainted.
func TestFleetFaultDryRun(t *testing.T) {
	cl, rackA, dc := rackCluster(t)
	dc.DryRun = true
	r := cl.start(options{decide: dc})
	now := time.Now()
	for _, n := range append(slices.Clone(rackA), "b-0") {
		cl.push(n, now, linkFlap(3)...)
	}
	cl.waitFor("a FleetFaultDryRun Event on the controller's Pod", 30*time.Second, func() bool {
		return len(cl.events("replica-a", "FleetFaultDryRun")) == 1
	})
	ev := cl.events("replica-a", "FleetFaultDryRun")[0]
	name := nodefault.FleetName(v1alpha1.FleetGroup{Label: rackLabel, Value: "a"}, "network")
	// Reported when raised: with the nodes that raised it (later ones join it).
	if !strings.HasPrefix(ev.Message, "dry-run: would raise fleet fault "+name) || !strings.Contains(ev.Message, "(threshold 3): a-0,a-1,a-2") ||
		ev.Type != corev1.EventTypeNormal {
		t.Errorf("Event %s %q, want a Normal one naming %s and the nodes that raised it", ev.Type, ev.Message, name)
	}
	cl.waitFor("four dry-run holds of rack A", 30*time.Second, func() bool {
		return testutil.ToFloat64(r.m.Decisions().WithLabelValues("dry-run-hold", "ok", "enforce")) == 4
	})
	time.Sleep(time.Second) // reconcile passes: reported once, nothing written
	if got := testutil.ToFloat64(r.m.Decisions().WithLabelValues("dry-run-fleet-fault", "ok", "")); got != 1 {
		t.Errorf("decisions{action=dry-run-fleet-fault} %v, want 1", got)
	}
	if n := len(cl.events("replica-a", "FleetFaultDryRun")); n != 1 {
		t.Errorf("%d FleetFaultDryRun Events, want 1", n)
	}
	store, err := nodefault.New(cl.cs, nodefault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if nf, err := store.Get(context.Background(), name); err == nil {
		t.Errorf("dry-run wrote the fleet fault record: %+v", nf.Status)
	}
	if got := testutil.ToFloat64(r.m.FleetFaults().WithLabelValues(rackLabel, "network")); got != 0 {
		t.Errorf("fleet fault gauge %v in dry-run, want 0 (none waits for a verdict)", got)
	}
	if got := testutil.ToFloat64(r.m.Held().WithLabelValues("fleet")); got != 0 {
		t.Errorf("held{reason=fleet} %v in dry-run, want 0", got)
	}
	for _, n := range append(slices.Clone(rackA), "b-0") {
		if cl.tainted(n) {
			t.Errorf("%s tainted in dry-run", n)
		}
	}
}

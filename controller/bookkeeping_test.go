package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/rules"
)

// heldFaults lists the NodeFaults in phase Held, as "node pack/rule reason" sorted:
// what an operator reads with kubectl get nodefaults -o wide.
func (cl *cluster) heldFaults() []string {
	cl.t.Helper()
	st, err := nodefault.New(cl.cs, nodefault.Options{})
	if err != nil {
		cl.t.Fatal(err)
	}
	list, err := st.List(context.Background())
	if err != nil {
		cl.t.Fatal(err)
	}
	var out []string
	for _, nf := range list {
		if nf.Status.Phase == v1alpha1.PhaseHeld {
			out = append(out, nf.Spec.Node+" "+nf.PackRule()+" "+nf.Status.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// TestTaintBookkeeping: which taints faultline placed is known from the NodeFault
// records only, and a leader that starts finds what a crashed one left half done.
//
//   - gpu-a carries faultline's taint and the annotations that used to prove
//     ownership (what its kubelet could write); no record says so: the controller
//     neither counts that taint in the budget nor removes it.
//   - gpu-b's record says Placing, the Node has no taint (the writer died before the
//     Node update): the new leader clears the record.
//   - gpu-c's record says Placing and the Node has the taint (the writer died after
//     the Node update): the new leader adopts it (Placed), counts it, lists it.
//
// With a budget of 2 nodes, gpu-c takes one; gpu-d's fault takes the other, which it
// would not get if the forged taint on gpu-a counted.
func TestTaintBookkeeping(t *testing.T) {
	cl := newCluster(t, "gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e")
	ctx := context.Background()
	taint := corev1.Taint{Key: rules.DefaultTaintKey, Value: xid79Rule, Effect: corev1.TaintEffectNoSchedule}
	taintText := rules.DefaultTaintKey + "=" + xid79Rule + ":NoSchedule"
	for _, name := range []string{"gpu-a", "gpu-c"} {
		n := cl.node(name)
		n.Spec.Taints = append(n.Spec.Taints, taint)
		if name == "gpu-a" {
			n.Annotations = map[string]string{
				fault.AnnotationLegacyEvidence: `[{"rule":"` + xid79Rule + `","pack":"nvidia-xid","taint":"` + taintText + `","taintPlaced":true}]`,
				fault.AnnotationFaults:         nodefault.Name("gpu-a", "nvidia-xid", xid79Rule),
			}
		}
		if _, err := cl.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crashed, err := nodefault.New(cl.cs, nodefault.Options{Owner: "replica-crashed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gpu-b", "gpu-c"} {
		if _, err := crashed.Record(ctx, name, "nvidia-xid", xid79Rule, nodefault.Change{
			Taint: &v1alpha1.TaintRecord{Taint: taintText, State: v1alpha1.TaintPlacing}}); err != nil {
			t.Fatal(err)
		}
	}

	r := cl.start(options{decide: decide.Config{MaxNodes: 2, MaxPercent: 100, DisableStorm: true}})
	taintOf := func(node string) *v1alpha1.TaintRecord {
		nf, err := cl.record(node, "nvidia-xid", xid79Rule)
		if err != nil {
			return nil
		}
		return nf.Status.Taint
	}
	cl.waitFor("gpu-c's taint adopted", 20*time.Second, func() bool {
		tr := taintOf("gpu-c")
		return tr != nil && tr.State == v1alpha1.TaintPlaced
	})
	cl.waitFor("gpu-b's record cleared", 20*time.Second, func() bool { return taintOf("gpu-b") == nil })
	if cl.tainted("gpu-b") {
		t.Error("gpu-b tainted from a Placing record")
	}

	cl.push("gpu-d", time.Now(), xid79)
	cl.waitFor("gpu-d tainted (the forged taint takes no budget)", 30*time.Second, func() bool { return cl.tainted("gpu-d") })
	cl.push("gpu-e", time.Now(), xid79)
	cl.waitFor("gpu-e held: gpu-c and gpu-d use the budget of 2", 30*time.Second, func() bool {
		return cl.phase("gpu-e", "nvidia-xid", xid79Rule) == v1alpha1.PhaseHeld
	})

	// What GET /api/v1/faults told: the records of gpu-c's and gpu-d's taints
	// (faultline's), gpu-e held for the budget, and no budget left.
	for _, n := range []string{"gpu-c", "gpu-d"} {
		cl.waitFor(n+"'s taint recorded Placed", 20*time.Second, func() bool {
			tr := taintOf(n)
			return tr != nil && tr.State == v1alpha1.TaintPlaced
		})
	}
	if got, want := cl.heldFaults(), []string{"gpu-e nvidia-xid/" + xid79Rule + " " + string(decide.ReasonBudget)}; !slices.Equal(got, want) {
		t.Errorf("held faults %v, want %v", got, want)
	}
	cl.waitFor("no budget left on the gauge", 10*time.Second, func() bool { return testutil.ToFloat64(r.m.BudgetLeft()) == 0 })

	// An untaint of gpu-a finds nothing of faultline's there.
	res, err := r.c.Untaint(ctx, "gpu-a", "", "untainted by the test")
	if err != nil || len(res.Cleared) != 0 || len(res.Removed) != 0 {
		t.Fatalf("untaint gpu-a: %+v, %v", res, err)
	}
	found := false
	for _, tt := range cl.node("gpu-a").Spec.Taints {
		found = found || tt == taint
	}
	if !found {
		t.Error("the untaint removed gpu-a's taint, which no record says faultline placed")
	}
	// The adopted taint is faultline's: the untaint removes it and frees the budget.
	if res, err := r.c.Untaint(ctx, "gpu-c", "", "untainted by the test"); err != nil || len(res.Removed) != 1 {
		t.Fatalf("untaint gpu-c: %+v, %v", res, err)
	}
	cl.waitFor("gpu-e tainted once gpu-c's budget is free", 30*time.Second, func() bool { return cl.tainted("gpu-e") })
}

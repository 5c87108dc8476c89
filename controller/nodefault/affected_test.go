package nodefault_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/rules"
)

// listing is a nodefault.Workloads that lists the pods it is set to and counts what
// it is asked and told.
type listing struct {
	pods     []v1alpha1.AffectedPod
	asked    int
	recorded []*v1alpha1.NodeFault
}

func (l *listing) OnNode(string) *v1alpha1.AffectedPods {
	l.asked++
	return &v1alpha1.AffectedPods{Time: metav1.Now(), Pods: l.pods}
}

func (l *listing) Recorded(nf *v1alpha1.NodeFault) { l.recorded = append(l.recorded, nf) }

// TestAffectedOncePerEpisode: the pods a fault touched are listed by the write of
// its first firing and told once; repeats, probe verdicts and taint bookkeeping
// leave them; a reopened record lists them again.
func TestAffectedOncePerEpisode(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	w := &listing{pods: []v1alpha1.AffectedPod{{Namespace: "ml", Name: "train-0", UID: "u0", GPUs: 8,
		Owner: &v1alpha1.WorkloadRef{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "llm"}}}}
	st, err := nodefault.New(env.Clientset(), nodefault.Options{Owner: "controller-0", Now: clk.Now, Workloads: w})
	if err != nil {
		t.Fatal(err)
	}
	f := xidFault("gpu-1", clk.Now())
	// Created placing (no status: nothing listed), then the first firing's write.
	if _, err := st.Record(ctx, "gpu-1", "nvidia-xid", "xid-79", nodefault.Change{Rule: f.Rule,
		Taint: &v1alpha1.TaintRecord{Taint: "faultline.io/faulty=xid-79:NoSchedule", State: v1alpha1.TaintPlacing}}); err != nil {
		t.Fatal(err)
	}
	if w.asked != 0 {
		t.Fatalf("asked %d times before the first firing was written", w.asked)
	}
	nf, err := st.Record(ctx, "", "", "", nodefault.Change{Fault: &f, Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint, Mode: rules.ModeEnforce, Decision: "taint",
		Taint: &v1alpha1.TaintRecord{Taint: "faultline.io/faulty=xid-79:NoSchedule", State: v1alpha1.TaintPlaced}})
	if err != nil {
		t.Fatal(err)
	}
	a := nf.Status.Affected
	if a == nil || len(a.Pods) != 1 || a.Pods[0].Owner == nil || a.Pods[0].Owner.Kind != "JobSet" || a.Pods[0].GPUs != 8 {
		t.Fatalf("affected %+v: the CRD lost a field", a)
	}
	if w.asked != 1 || len(w.recorded) != 1 || w.recorded[0].Status.Affected == nil {
		t.Fatalf("asked %d, told %d", w.asked, len(w.recorded))
	}

	// Repeats and other writes keep the first list.
	w.pods = append(w.pods, v1alpha1.AffectedPod{Namespace: "ml", Name: "late", UID: "u1", GPUs: 1})
	clk.Add(time.Minute)
	f2 := xidFault("gpu-1", clk.Now())
	for _, c := range []nodefault.Change{
		{Fault: &f2, Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint, Decision: "already-tainted"},
		{Probe: &v1alpha1.ProbeVerdict{Purpose: "recover", Verdict: "failed"}},
		{Fault: &f2, Firing: true},
	} {
		if nf, err = st.Record(ctx, "gpu-1", "nvidia-xid", "xid-79", c); err != nil {
			t.Fatal(err)
		}
	}
	if w.asked != 1 || len(w.recorded) != 1 || len(nf.Status.Affected.Pods) != 1 {
		t.Errorf("after repeats: asked %d, told %d, affected %+v", w.asked, len(w.recorded), nf.Status.Affected)
	}

	// Resolved, then back: a new episode, listed again.
	if _, err := st.Record(ctx, "gpu-1", "nvidia-xid", "xid-79", nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint, ClearTaint: true}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	f3 := xidFault("gpu-1", clk.Now())
	if nf, err = st.Record(ctx, "", "", "", nodefault.Change{Fault: &f3, Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseHold, Reason: "budget"}); err != nil {
		t.Fatal(err)
	}
	if w.asked != 2 || len(w.recorded) != 2 || nf.Status.Affected == nil || len(nf.Status.Affected.Pods) != 2 {
		t.Errorf("reopened: asked %d, told %d, affected %+v", w.asked, len(w.recorded), nf.Status.Affected)
	}
}

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
)

const shardLabel = "faultline.io/shard"

// TestShards: two controllers split 20 nodes by a label — shard a owns the nodes
// labelled a, the default shard b every other node (labelled b, with an unknown
// value, or unlabelled). An Xid 79 on every node taints each exactly once, by the
// shard that owns it, none missed, and so on a node created later without the
// label. A fault shard a holds over its budget moves with
// its node when the node is relabelled to b, and b places it.
func TestShards(t *testing.T) {
	cl := newCluster(t)
	owner := map[string]string{} // node → identity of the shard that must taint it
	var nodes []string
	for i := range 20 {
		name := fmt.Sprintf("gpu-%02d", i)
		nodes = append(nodes, name)
		lbl := map[string]string{"nvidia.com/gpu.present": "true"}
		switch {
		case i < 9:
			lbl[shardLabel] = "a"
			owner[name] = "shard-a"
		case i < 16:
			lbl[shardLabel] = "b"
			owner[name] = "shard-b"
		case i < 18:
			lbl[shardLabel] = "c" // a value no shard names: the default shard's
			owner[name] = "shard-b"
		default:
			owner[name] = "shard-b" // unlabelled: the default shard's
		}
		if _, err := cl.cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const moved = "gpu-08" // held by a over its budget, then relabelled to b
	owner[moved] = "shard-b"
	shard := func(id, sel string, budget int) *running {
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		return cl.start(options{identity: id, lease: "faultline-controller-" + id, checkpoint: "faultline-checkpoint-" + id,
			decide: decide.Config{MaxPercent: 100, MaxNodes: budget, DisableStorm: true}, act: act.Options{Shard: s}})
	}
	a := shard("shard-a", shardLabel+"=a", 8)
	b := shard("shard-b", shardLabel+" notin (a)", 0)
	cl.waitFor("shard a counting its 9 nodes", 10*time.Second, func() bool { return testutil.ToFloat64(a.m.EligibleNodes()) == 9 })
	cl.waitFor("shard b counting its 11 nodes", 10*time.Second, func() bool { return testutil.ToFloat64(b.m.EligibleNodes()) == 11 })

	now := time.Now()
	for _, n := range nodes {
		if n != moved {
			cl.push(n, now, xid79)
		}
	}
	for _, n := range nodes {
		if n != moved {
			cl.waitFor(n+" tainted", 30*time.Second, func() bool { return cl.tainted(n) })
		}
	}
	// Shard a is full (8 of its budget of 8): the fault on its ninth node is held.
	cl.push(moved, now.Add(time.Second), xid79)
	cl.waitFor(moved+"'s fault held by shard a", 20*time.Second, func() bool {
		nf, err := cl.record(moved, "nvidia-xid", "xid-gpu-lost")
		return err == nil && nf.Status.Phase == "Held" && nf.Status.Owner == "shard-a"
	})
	// b has read the line and left it to a: after the move, b takes the fault over
	// from its record, not from the line.
	cl.waitFor("shard b skipping shard a's 9 lines", 20*time.Second, func() bool { return testutil.ToFloat64(b.m.OtherShard()) == 9 })
	cl.waitFor("shard a's held gauge at 1", 10*time.Second, func() bool {
		return testutil.ToFloat64(a.m.Held().WithLabelValues(string(decide.ReasonBudget))) == 1
	})
	n := cl.node(moved)
	n.Labels[shardLabel] = "b"
	if _, err := cl.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.waitFor(moved+" tainted by its new shard", 30*time.Second, func() bool { return cl.tainted(moved) })
	cl.waitFor("shard a seeing one node leave", 10*time.Second, func() bool {
		return testutil.ToFloat64(a.m.ShardMoves().WithLabelValues("left")) == 1
	})
	if got := testutil.ToFloat64(b.m.ShardMoves().WithLabelValues("joined")); got != 1 {
		t.Errorf("shard b saw %v nodes join, want 1", got)
	}
	cl.waitFor("shard a holding nothing once its node left", 10*time.Second, func() bool {
		return testutil.ToFloat64(a.m.Held().WithLabelValues(string(decide.ReasonBudget))) == 0
	})
	// A node created later without the label: the default shard's.
	const late = "gpu-20"
	nodes, owner[late] = append(nodes, late), "shard-b"
	if _, err := cl.cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: late,
		Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.waitFor("shard b counting "+late, 10*time.Second, func() bool { return testutil.ToFloat64(b.m.EligibleNodes()) == 13 })
	cl.push(late, time.Now(), xid79)
	cl.waitFor(late+" tainted", 30*time.Second, func() bool { return cl.tainted(late) })
	time.Sleep(time.Second) // room for a second taint, were one coming

	for _, n := range nodes {
		if got := len(cl.faultTaints(n)); got != 1 {
			t.Errorf("%s carries %d faultline taints, want 1", n, got)
		}
		// The status (owner, history) is written one request after the taint:
		// wait for it rather than race it.
		var nf *v1alpha1.NodeFault
		cl.waitFor(n+"'s NodeFault with its taint placed", 20*time.Second, func() bool {
			var err error
			nf, err = cl.record(n, "nvidia-xid", "xid-gpu-lost")
			return err == nil && nf.Status.Taint != nil && nf.Status.Taint.State == v1alpha1.TaintPlaced
		})
		if nf.Status.Owner != owner[n] {
			t.Errorf("%s's fault written by %q, want its shard %q", n, nf.Status.Owner, owner[n])
		}
		taints := 0
		for _, d := range nf.Status.History {
			if d.Kind == string(decide.KindTaint) {
				taints++
			}
		}
		if taints != 1 {
			t.Errorf("%s's fault decided taint %d times, want once: %+v", n, taints, nf.Status.History)
		}
	}
	// Each shard read the other's lines and left them alone.
	if got := testutil.ToFloat64(a.m.OtherShard()); got != 12 {
		t.Errorf("shard a skipped %v lines of other shards, want b's 12", got)
	}
	if got := testutil.ToFloat64(b.m.OtherShard()); got != 9 {
		t.Errorf("shard b skipped %v lines of other shards, want a's 9 (gpu-08's while a owned it)", got)
	}
}

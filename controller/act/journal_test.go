package act

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/checkpoint"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestJournaledFence: with a journal, a new fault's fence is one Node write (its
// Placing claim shares a journal write with the other fences of the moment), its
// record is written with the books, and what a leader that stops between the two
// leaves is taken over by the next one, never read as another's taint.
func TestJournaledFence(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	env.InstallCRD(t, v1alpha1.CRDYAML)
	ctx := context.Background()
	cs := env.Clientset()
	const ns, cm = "faultline", "faultline-checkpoint"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	xid := rule("nvidia-xid", "xid-gpu-lost", rules.DefaultTaintKey, "xid-gpu-lost")
	taint := rules.DefaultTaintKey + "=xid-gpu-lost:NoSchedule"
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	records := func(t *testing.T, a *Actor, node string) map[string]v1alpha1.TaintRecord {
		t.Helper()
		l, err := a.records.ForNode(ctx, node, true)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]v1alpha1.TaintRecord{}
		for _, nf := range l {
			if nf.Status.Taint != nil {
				out[nf.Spec.Pack+"/"+nf.Spec.Rule] = *nf.Status.Taint
			}
		}
		return out
	}
	stored := func(t *testing.T) []checkpoint.Placing {
		t.Helper()
		j := checkpoint.NewJournal(cs, ns, cm, 0)
		if err := j.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return j.Left()
	}
	leader := func(t *testing.T) (*Actor, *writeCounter, *checkpoint.Journal) {
		j := checkpoint.NewJournal(cs, ns, cm, 0)
		if err := j.Load(ctx); err != nil {
			t.Fatal(err)
		}
		a, wc := startActor(t, env.RESTConfig(), Options{Journal: j})
		return a, wc, j
	}

	createNodes(t, cs, "j-1", "j-2", "j-3", "j-4")
	a, wc, j := leader(t)
	eventually.NoError(t, 10*time.Second, "j-1 cached", func() error {
		_, err := a.Nodes().Get("j-1")
		return err
	})

	// The fence: the Node, and the claim in the journal; no record yet.
	recs, nodes := wc.records.Load(), wc.n.Load()
	pt, err := a.PlaceTaint(ctx, xidFault("j-1", xid, t0), "", nodefault.Change{}, nil)
	if err != nil || len(pt.Result().Added) != 1 {
		t.Fatalf("PlaceTaint: %+v, %v", pt.Result(), err)
	}
	if dr, dn := wc.records.Load()-recs, wc.n.Load()-nodes; dr != 0 || dn != 1 {
		t.Fatalf("the fence took %d record writes and %d Node writes, want 0 and 1", dr, dn)
	}
	if got := stored(t); len(got) != 1 || got[0].Node != "j-1" || got[0].Taint != taint {
		t.Fatalf("journal after the fence: %+v", got)
	}
	// Until the books, the facts count the taint as faultline's: the budget sees it.
	eventually.True(t, 10*time.Second, "j-1 tainted in the facts", func() bool {
		f, err := a.Facts()
		return err == nil && slices.Equal(f.Tainted["j-1"], []string{xid.String()})
	})
	// The books: the record says Placed; the claim goes with the next journal write.
	if _, err := pt.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if r := records(t, a, "j-1"); r[xid.String()].State != v1alpha1.TaintPlaced || r[xid.String()].Taint != taint {
		t.Fatalf("j-1's record after Settle: %+v", r)
	}
	if len(j.Of("j-1")) != 0 {
		t.Fatalf("claim kept after the books: %+v", j.Of("j-1"))
	}
	if _, _, err := a.CheckPlacing(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := stored(t); len(got) != 0 {
		t.Fatalf("journal after the books and a check: %+v", got)
	}
	f, _ := a.Facts()
	if !slices.Equal(f.Tainted["j-1"], []string{xid.String()}) {
		t.Fatalf("facts after the books: %v", f.Tainted["j-1"])
	}

	t.Run("NextLeaderTakesTheFenceOver", func(t *testing.T) {
		// The leader stops between j-2's fence and its books.
		if _, err := a.PlaceTaint(ctx, xidFault("j-2", xid, t0), "", nodefault.Change{}, nil); err != nil {
			t.Fatal(err)
		}
		if len(records(t, a, "j-2")) != 0 {
			t.Fatal("a record written with the fence")
		}
		a.Shutdown()
		next, _, nj := leader(t)
		eventually.NoError(t, 10*time.Second, "j-2 cached", func() error {
			_, err := next.Nodes().Get("j-2")
			return err
		})
		// The line is decided again: the taint is found as faultline's, not as one
		// somebody else placed.
		res, err := next.TaintNode(ctx, xidFault("j-2", xid, t0.Add(time.Second)), "")
		if err != nil || res.Existing != "" || len(res.Added) != 0 {
			t.Fatalf("the decision again: %+v, %v", res, err)
		}
		if r := records(t, next, "j-2"); r[xid.String()].State != v1alpha1.TaintPlaced {
			t.Fatalf("j-2's record: %+v", r)
		}
		if len(nj.Of("j-2")) != 0 {
			t.Fatalf("claim kept: %+v", nj.Of("j-2"))
		}
		// And an untaint removes it.
		if res, err := next.UntaintNode(ctx, "j-2", AllRules); err != nil || len(res.Removed) != 1 {
			t.Fatalf("untaint: %+v, %v", res, err)
		}
		a, j = next, nj
	})

	t.Run("LeftClaimsCheckedAgainstTheNode", func(t *testing.T) {
		// Claims a stopped leader left with no decision to follow: j-3's Node update
		// never happened, j-4's did.
		updateNode(t, cs, "j-4", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: rules.DefaultTaintKey, Value: "xid-gpu-lost", Effect: corev1.TaintEffectNoSchedule})
		})
		at := time.Now().Add(-30 * time.Second)
		for _, node := range []string{"j-3", "j-4"} {
			if err := j.Claim(ctx, checkpoint.Placing{Node: node, Pack: xid.Pack, Rule: xid.ID, Taint: taint, Time: at}); err != nil {
				t.Fatal(err)
			}
		}
		// Even at the start of a term, a claim younger than a minute waits for the
		// decision of its line.
		for _, node := range []string{"j-3", "j-4"} {
			j.Abandon(node, xid.String())
		}
		if adopted, cleared, err := a.CheckPlacing(ctx, 0); err != nil || len(adopted)+len(cleared) != 0 {
			t.Fatalf("young claims settled: %v %v %v", adopted, cleared, err)
		}
		at = time.Now().Add(-2 * time.Minute)
		for _, node := range []string{"j-3", "j-4"} {
			if err := j.Claim(ctx, checkpoint.Placing{Node: node, Pack: xid.Pack, Rule: xid.ID, Taint: taint, Time: at}); err != nil {
				t.Fatal(err)
			}
		}
		// Claims a placement under way holds are never settled under it, however old.
		if adopted, cleared, err := a.CheckPlacing(ctx, 0); err != nil || len(adopted)+len(cleared) != 0 {
			t.Fatalf("held claims settled: %v %v %v", adopted, cleared, err)
		}
		for _, node := range []string{"j-3", "j-4"} {
			j.Abandon(node, xid.String())
		}
		adopted, cleared, err := a.CheckPlacing(ctx, 0)
		if err != nil || !slices.Equal(adopted, []string{fault.Key("j-4", xid.Pack, xid.ID)}) ||
			!slices.Equal(cleared, []string{fault.Key("j-3", xid.Pack, xid.ID)}) {
			t.Fatalf("CheckPlacing = %v, %v, %v", adopted, cleared, err)
		}
		if r := records(t, a, "j-4"); r[xid.String()].State != v1alpha1.TaintPlaced {
			t.Fatalf("j-4's record: %+v", r)
		}
		if r := records(t, a, "j-3"); len(r) != 0 {
			t.Fatalf("j-3's record: %+v", r)
		}
		if got := stored(t); len(got) != 0 {
			t.Fatalf("journal after the check: %+v", got)
		}
	})
}

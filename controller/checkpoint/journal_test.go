package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/faultline-dev/faultline/controller/checkpoint"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestJournal runs the placing journal against a real API server: claims are in
// the ConfigMap when Claim returns, concurrent claims share writes, the position
// saved beside them is kept both ways, and a journal that has not loaded never
// drops what the last leader left.
func TestJournal(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	ctx := context.Background()
	cs := env.Clientset()
	const ns, name = "faultline", "faultline-checkpoint"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored := func(t *testing.T) map[string]checkpoint.Placing {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ps []checkpoint.Placing
		if err := json.Unmarshal([]byte(cm.Data[checkpoint.PlacingKey]), &ps); err != nil {
			t.Fatalf("%s: %v", checkpoint.PlacingKey, err)
		}
		out := map[string]checkpoint.Placing{}
		for _, p := range ps {
			out[p.Node+"/"+p.ID()] = p
		}
		return out
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	placing := func(i int) checkpoint.Placing {
		return checkpoint.Placing{Node: fmt.Sprintf("gpu-%03d", i), Pack: "nvidia-xid", Rule: "xid-79",
			Taint: "faultline.io/gpu-lost=xid-79:NoSchedule", Time: at}
	}

	old := checkpoint.NewJournal(cs, ns, name, 0)
	if err := old.Load(ctx); err != nil || len(old.Left()) != 0 {
		t.Fatalf("Load without a ConfigMap: %v, %v", old.Left(), err)
	}
	if err := old.Claim(ctx, placing(0)); err != nil {
		t.Fatal(err)
	}
	if got := stored(t); len(got) != 1 || got["gpu-000/nvidia-xid/xid-79"] != placing(0) {
		t.Fatalf("stored after Claim: %v", got)
	}

	t.Run("PositionKeptBothWays", func(t *testing.T) {
		st := checkpoint.New(cs, ns, name)
		if err := st.SaveState(ctx, []byte(`{"p":1}`), at, []byte(`{"s":1}`)); err != nil {
			t.Fatal(err)
		}
		if got := stored(t); len(got) != 1 {
			t.Fatalf("claims after SaveState: %v", got)
		}
		// The journal's copy of the ConfigMap is stale now: its write must not
		// conflict for good, nor drop the position.
		if err := old.Claim(ctx, placing(1)); err != nil {
			t.Fatal(err)
		}
		pos, storms, err := st.LoadState(ctx)
		if err != nil || string(pos) != `{"p":1}` || string(storms) != `{"s":1}` {
			t.Fatalf("position after Claim: %s %s %v", pos, storms, err)
		}
		if got := stored(t); len(got) != 2 {
			t.Fatalf("claims: %v", got)
		}
	})

	t.Run("NextLeaderLoads", func(t *testing.T) {
		var seen []string
		next := checkpoint.NewJournal(cs, ns, name, 0)
		next.OnChange(func(p checkpoint.Placing, held bool) {
			if held {
				seen = append(seen, p.Node)
			}
		})
		// A claim before Load reads what is there first.
		if err := next.Claim(ctx, placing(2)); err != nil {
			t.Fatal(err)
		}
		if got := stored(t); len(got) != 3 {
			t.Fatalf("a claim before Load dropped the last leader's: %v", got)
		}
		// The last leader's claims are left to check; its own is held until released.
		if left := next.Left(); len(left) != 2 || left[0].Node != "gpu-000" || left[1].Node != "gpu-001" || len(seen) != 3 {
			t.Fatalf("next leader leaves %v to check (told %v)", left, seen)
		}
		next.Abandon("gpu-002", "nvidia-xid/xid-79")
		if left := next.Left(); len(left) != 3 {
			t.Fatalf("an abandoned claim is not left to check: %v", left)
		}
		next.Release("gpu-000", "nvidia-xid/xid-79")
		next.Release("gpu-001", "nvidia-xid/xid-79")
		if got := stored(t); len(got) != 3 {
			t.Fatalf("Release wrote: %v", got)
		}
		if err := next.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := stored(t); len(got) != 1 || got["gpu-002/nvidia-xid/xid-79"] != placing(2) {
			t.Fatalf("after Flush: %v", got)
		}
		old = next
	})

	t.Run("ClaimsShareWrites", func(t *testing.T) {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cm.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		const n = 60
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 100; i < 100+n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- old.Claim(ctx, placing(i))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := stored(t); len(got) != n+1 {
			t.Fatalf("%d claims stored, want %d", len(got), n+1)
		}
		final, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		writes := 0
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				writes++
			}
			if o, ok := ev.Object.(*corev1.ConfigMap); ok && o.ResourceVersion == final.ResourceVersion {
				break
			}
		}
		if writes >= n {
			t.Fatalf("%d claims took %d writes: none shared", n, writes)
		}
		t.Logf("%d concurrent claims in %d writes", n, writes)
	})

	t.Run("FullRefusesAndKeepsNothing", func(t *testing.T) {
		small := checkpoint.NewJournal(cs, ns, name+"-small", 400)
		if err := small.Claim(ctx, placing(1), placing(2)); err != nil {
			t.Fatal(err)
		}
		err := small.Claim(ctx, placing(3), placing(4))
		if !errors.Is(err, checkpoint.ErrJournalFull) {
			t.Fatalf("over the bound: %v", err)
		}
		if got := append(small.Of("gpu-001"), small.Of("gpu-002")...); len(got) != 2 || len(small.Of("gpu-003")) != 0 {
			t.Fatalf("a refused claim was kept: %v", got)
		}
		// Replacing a claim of the same rule does not grow it.
		p := placing(1)
		p.Time = at.Add(time.Hour)
		if err := small.Claim(ctx, p); err != nil {
			t.Fatalf("replacing a claim: %v", err)
		}
	})
}

package leader_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/faultline-dev/faultline/controller/leader"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestFailover: two replicas, one leads; when it stops, the other takes over.
func TestFailover(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faultline"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	leading := map[string]bool{}
	started := make(chan string, 4)
	run := func(ctx context.Context, id string) {
		_ = leader.Run(ctx, leader.Config{Client: cs, Namespace: "faultline", Name: "faultline-controller", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond},
			func(lctx context.Context) {
				mu.Lock()
				leading[id] = true
				mu.Unlock()
				started <- id
				<-lctx.Done()
				mu.Lock()
				leading[id] = false
				mu.Unlock()
			})
	}
	ctxA, stopA := context.WithCancel(ctx)
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	go run(ctxA, "a")
	first := waitFor(t, started)
	if first != "a" {
		t.Fatalf("first leader %s", first)
	}
	go run(ctxB, "b")
	time.Sleep(time.Second)
	mu.Lock()
	both := leading["a"] && leading["b"]
	mu.Unlock()
	if both {
		t.Fatal("two leaders at once")
	}
	t0 := time.Now()
	stopA() // releases the lease on cancel
	if second := waitFor(t, started); second != "b" {
		t.Fatalf("second leader %s", second)
	}
	t.Logf("failover took %s", time.Since(t0).Round(time.Millisecond))
}

func waitFor(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("no leader within 20s")
	}
	return ""
}

// TestCampaignWaitsForLead: a replica loses its lease (another holder takes it over)
// while its lead is slow to stop. It campaigns again only after that lead returned:
// two terms of one replica never run at once.
func TestCampaignWaitsForLead(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faultline"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var running, overlaps, terms atomic.Int32
	started := make(chan string, 4)
	go func() {
		_ = leader.Run(ctx, leader.Config{Client: cs, Namespace: "faultline", Name: "faultline-controller", Identity: "a",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond},
			func(lctx context.Context) {
				if running.Add(1) > 1 {
					overlaps.Add(1)
				}
				terms.Add(1)
				started <- "a"
				<-lctx.Done()
				time.Sleep(4 * time.Second) // a slow last save
				running.Add(-1)
			})
	}()
	waitFor(t, started)
	// Another holder takes the lease: replica a's renewals fail and its term ends.
	other := "intruder"
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // a renews meanwhile
		lease, err := cs.CoordinationV1().Leases("faultline").Get(ctx, "faultline-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime = &other, &now, &now
		_, err = cs.CoordinationV1().Leases("faultline").Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The intruder never renews: a takes the lease back once it expired, for a second term.
	waitFor(t, started)
	if n := overlaps.Load(); n != 0 {
		t.Errorf("a second term started while the first was still stopping (%d overlaps)", n)
	}
	if terms.Load() != 2 {
		t.Errorf("%d terms, want 2", terms.Load())
	}
}

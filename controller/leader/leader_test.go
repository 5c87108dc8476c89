package leader_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

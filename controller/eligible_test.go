package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
)

// TestBudgetOverEligibleNodes: 900 CPU nodes beside 100 GPU nodes. The GPU node
// selector defines the population, so a 10 % budget allows 10 taints (not 100) and
// an Xid 79 on 30 GPU nodes is a storm (a 20 % share of 100, not of 1,000).
func TestBudgetOverEligibleNodes(t *testing.T) {
	const cpu, gpu, faulty = 900, 100, 30
	cl := newCluster(t)
	cfg := cl.env.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 1000
	fast, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < cpu+gpu; i += 8 {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cpu-%03d", i)}}
				if i >= cpu {
					n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%03d", i-cpu),
						Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
				}
				if _, err := fast.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	r := cl.start(options{decide: decide.Config{MaxPercent: 10, StormShare: 0.2},
		act: act.Options{Eligible: labels.SelectorFromSet(labels.Set{"nvidia.com/gpu.present": "true"})}})
	cl.waitFor("100 eligible nodes", 20*time.Second, func() bool { return testutil.ToFloat64(r.m.EligibleNodes()) == gpu })

	now := time.Now()
	for i := 0; i < faulty; i++ {
		cl.push(fmt.Sprintf("gpu-%03d", i), now, xid79)
	}
	held := func() float64 {
		return testutil.ToFloat64(r.m.Held().WithLabelValues("budget")) + testutil.ToFloat64(r.m.Held().WithLabelValues("storm"))
	}
	cl.waitFor("20 faults held", 30*time.Second, func() bool { return held() == faulty-10 })
	time.Sleep(time.Second)
	tainted := 0
	for i := 0; i < faulty; i++ {
		if cl.tainted(fmt.Sprintf("gpu-%03d", i)) {
			tainted++
		}
	}
	if tainted != 10 {
		t.Errorf("%d GPU nodes tainted, want 10 (10 %% of 100 GPU nodes)", tainted)
	}
	if s := testutil.ToFloat64(r.m.Held().WithLabelValues("storm")); s == 0 {
		t.Errorf("no fault held by a storm: an Xid 79 on %d of %d GPU nodes is over the 20 %% share", faulty, gpu)
	}
}

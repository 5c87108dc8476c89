package controller_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
)

// TestBudgetOverEligibleNodes: 900 CPU nodes beside 100 GPU nodes. The GPU node
// selector defines the population, so a 10 % budget allows 10 taints (not 100) and
// an Xid 79 on 30 GPU nodes is a storm (a 20 % share of 100, not of 1,000).
func TestBudgetOverEligibleNodes(t *testing.T) {
	const cpu, gpu, faulty = 900, 100, 30
	cl := newCluster(t)
	cl.createNodes(cpu+gpu, func(i int) *corev1.Node {
		if i >= cpu {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%03d", i-cpu),
				Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cpu-%03d", i)}}
	})

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
	count := func() int {
		n := 0
		for i := 0; i < faulty; i++ {
			if cl.tainted(fmt.Sprintf("gpu-%03d", i)) {
				n++
			}
		}
		return n
	}
	// The taints are carried out on the workers, after their decisions.
	cl.waitFor("10 tainted", 30*time.Second, func() bool { return count() >= 10 })
	time.Sleep(time.Second)
	if tainted := count(); tainted != 10 {
		t.Errorf("%d GPU nodes tainted, want 10 (10 %% of 100 GPU nodes)", tainted)
	}
	if s := testutil.ToFloat64(r.m.Held().WithLabelValues("storm")); s == 0 {
		t.Errorf("no fault held by a storm: an Xid 79 on %d of %d GPU nodes is over the 20 %% share", faulty, gpu)
	}
}

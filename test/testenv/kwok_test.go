package testenv_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// kwok simulates GPU nodes against the real apiserver as kubelets would: each becomes
// Ready with its 8 GPUs and no taint, each renews its node lease every quarter of the
// lease duration (10 s), so every lease is renewed again well within 20 s, and each
// refreshes its status heartbeat (every 5 minutes by default; every 2 s plus up to
// 10 s here, to see it happen).
func TestKwokNodesReadyAndRenewLeases(t *testing.T) {
	const n = 200
	env := testenv.Start(t, testenv.Options{Kwok: &testenv.KwokOptions{Nodes: n, StatusReportPeriod: 2 * time.Second}})
	cs := env.Clientset()
	ctx := ctxT(t, 5*time.Minute)

	t0 := time.Now()
	eventually.NoError(t, 2*time.Minute, fmt.Sprintf("%d simulated GPU nodes Ready", n), func() error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, nd := range nodes.Items {
			gpus := nd.Status.Allocatable["nvidia.com/gpu"]
			if nodeReady(&nd) && gpus.Value() == 8 && len(nd.Spec.Taints) == 0 && nd.Labels["nvidia.com/gpu.present"] == "true" {
				ready++
			}
		}
		if len(nodes.Items) != n || ready != n {
			return fmt.Errorf("%d nodes, %d of them Ready GPU nodes without taints", len(nodes.Items), ready)
		}
		return nil
	})
	t.Logf("%d nodes Ready in %s", n, time.Since(t0).Round(10*time.Millisecond))

	renewals := func() (map[string]time.Time, error) {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]time.Time{}
		for _, ls := range l.Items {
			if ls.Spec.RenewTime == nil || ls.Spec.LeaseDurationSeconds == nil || *ls.Spec.LeaseDurationSeconds != testenv.KwokLeaseDurationSeconds {
				return nil, fmt.Errorf("lease %s: %+v", ls.Name, ls.Spec)
			}
			out[ls.Name] = ls.Spec.RenewTime.Time
		}
		return out, nil
	}
	heartbeats := func() (map[string]time.Time, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]time.Time{}
		for _, nd := range nodes.Items {
			for _, c := range nd.Status.Conditions {
				if c.Type == corev1.NodeReady {
					out[nd.Name] = c.LastHeartbeatTime.Time
				}
			}
		}
		return out, nil
	}
	var first map[string]time.Time
	eventually.NoError(t, time.Minute, fmt.Sprintf("a lease for each of the %d nodes", n), func() error {
		var err error
		if first, err = renewals(); err == nil && len(first) != n {
			err = fmt.Errorf("%d leases", len(first))
		}
		return err
	})
	beats, err := heartbeats()
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	eventually.NoError(t, 20*time.Second, "every lease renewed again", func() error {
		now, err := renewals()
		if err != nil {
			return err
		}
		stale := 0
		for name, rt := range first {
			if !now[name].After(rt) {
				stale++
			}
		}
		if stale > 0 {
			return fmt.Errorf("%d of %d leases not renewed yet", stale, n)
		}
		return nil
	})
	t.Logf("every lease renewed again within %s", time.Since(t1).Round(10*time.Millisecond))
	// Up to 12 s between a node's heartbeats, for 200 nodes from one kwok process:
	// on two cores shared with the 20,000-node scale test, one heartbeat was seen
	// later than 20 s. What is asserted is that each one comes; the time is logged.
	eventually.NoError(t, time.Minute, "every status heartbeat refreshed", func() error {
		now, err := heartbeats()
		if err != nil {
			return err
		}
		stale := 0
		for name, hb := range beats {
			if !now[name].After(hb) {
				stale++
			}
		}
		if len(beats) != n || stale > 0 {
			return fmt.Errorf("%d of %d heartbeats not refreshed yet", stale, len(beats))
		}
		return nil
	})
	t.Logf("every status heartbeat refreshed within %s", time.Since(t1).Round(10*time.Millisecond))
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/test/eventually"
)

// TestDefaultLadder, with the real apiserver and Loki and the default packs alone:
// the built-in xid-gpu-lost rule taints on the first Xid 79, records the Xid back
// after one reboot without climbing, and hands the node to the hardware team (the
// service step: label and condition) when the Xid is back after the second reboot
// (gpud's rule). Nothing is drained: the node's pod stays, and no step that takes
// capacity is decided.
func TestDefaultLadder(t *testing.T) {
	cl := newCluster(t, "gpu-d")
	rs := cl.replicaSet("trainer")
	cl.runningPod("gpu-d", "trainer-a", rs)
	r := cl.start(options{decide: decide.Config{MaxPercent: 100, DisableStorm: true}})

	const line = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	record := func() *v1alpha1.NodeFault {
		nf, err := cl.record("gpu-d", "nvidia-xid", "xid-gpu-lost")
		if err != nil {
			return nil
		}
		return nf
	}
	firings := func() []v1alpha1.Firing {
		if nf := record(); nf != nil && nf.Status.Escalation != nil {
			return nf.Status.Escalation.Firings
		}
		return nil
	}
	escalation := func() v1alpha1.Escalation {
		if nf := record(); nf != nil && nf.Status.Escalation != nil {
			return *nf.Status.Escalation
		}
		return v1alpha1.Escalation{}
	}

	cl.pushBoot("gpu-d", "boot-1", time.Now(), line)
	cl.waitFor("gpu-d tainted", 30*time.Second, func() bool { return cl.tainted("gpu-d") })
	// Back after one reboot: recorded, not climbed.
	cl.pushBoot("gpu-d", "boot-2", time.Now(), line)
	eventually.NoError(t, 30*time.Second, "the firing of boot-2 recorded", func() error {
		if f := firings(); len(f) != 2 || f[1].BootID != "boot-2" {
			return fmt.Errorf("firings %+v", f)
		}
		return nil
	})
	if e := escalation(); e.Step != 0 {
		t.Fatalf("climbed after one reboot: %+v", e)
	}
	// Back after the second reboot: the service step.
	cl.pushBoot("gpu-d", "boot-3", time.Now(), line)
	cl.waitFor("the firing after the second reboot reaches the service step", 30*time.Second, func() bool {
		e := escalation()
		return e.Step == 1 && e.State == v1alpha1.StepDone
	})
	if e := escalation(); e.Action != "service" || !strings.Contains(e.Reason, "after 2 reboot(s)") {
		t.Errorf("the default ladder's step: %+v", e)
	}
	n := cl.node("gpu-d")
	if n.Labels[act.LabelService] != "required" {
		t.Errorf("gpu-d labels %v, want %s=required", n.Labels, act.LabelService)
	}
	var cond *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == act.ConditionService {
			cond = &n.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionTrue || !strings.Contains(cond.Message, "nvidia-xid/xid-gpu-lost") {
		t.Errorf("gpu-d's %s condition: %+v", act.ConditionService, cond)
	}

	// Nothing was disturbed: the pod is there, the node was not cordoned, and the
	// ladder decided no step but service.
	if !cl.podExists("trainer-a") || n.Spec.Unschedulable {
		t.Errorf("gpu-d disturbed: pod there %v, unschedulable %v", cl.podExists("trainer-a"), n.Spec.Unschedulable)
	}
	for _, a := range []string{"escalate-drain", "escalate-gpu-reset", "escalate-remediate"} {
		for _, res := range []string{"ok", "waiting", "error"} {
			if v := testutil.ToFloat64(r.m.Decisions().WithLabelValues(a, res, "enforce")); v != 0 {
				t.Errorf("decisions{%s,%s} = %v, want 0", a, res, v)
			}
		}
	}
	if v := testutil.ToFloat64(r.m.Decisions().WithLabelValues("escalate-service", "ok", "enforce")); v != 1 {
		t.Errorf("decisions{escalate-service,ok} = %v, want 1", v)
	}
	for _, h := range record().Status.History {
		if strings.HasPrefix(h.Kind, "escalate-") && h.Kind != "escalate-service" {
			t.Errorf("history has %s: %+v", h.Kind, h)
		}
	}
}

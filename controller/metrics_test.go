package controller_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
)

// The NodeFault gauges count the records the cache holds at each scrape: by scope,
// phase and mode, and the unresolved ones past the first rung by their step.
func TestRecordGauges(t *testing.T) {
	m := controller.NewMetrics(nil)
	if n := testutil.CollectAndCount(m.Records()); n != 0 {
		t.Fatalf("%d series before the cache exists", n)
	}
	nf := func(scope v1alpha1.Scope, phase v1alpha1.Phase, mode string, e *v1alpha1.Escalation) *v1alpha1.NodeFault {
		return &v1alpha1.NodeFault{Spec: v1alpha1.NodeFaultSpec{Scope: scope},
			Status: v1alpha1.NodeFaultStatus{Phase: phase, Mode: mode, Escalation: e}}
	}
	records := []*v1alpha1.NodeFault{
		nf("", v1alpha1.PhaseTainted, "enforce", &v1alpha1.Escalation{Step: 2, Action: "service", State: v1alpha1.StepDone}),
		nf(v1alpha1.ScopeNode, v1alpha1.PhaseTainted, "enforce", &v1alpha1.Escalation{Step: 1, Action: "drain", State: v1alpha1.StepWaiting}),
		nf(v1alpha1.ScopeNode, v1alpha1.PhaseTainted, "enforce", &v1alpha1.Escalation{Step: 0}),
		nf(v1alpha1.ScopeNode, v1alpha1.PhaseResolved, "enforce", &v1alpha1.Escalation{Step: 1, Action: "drain", State: v1alpha1.StepDone}),
		nf(v1alpha1.ScopeNode, v1alpha1.PhaseObserved, "annotate", nil),
		nf(v1alpha1.ScopeFleet, v1alpha1.PhaseHeld, "", nil),
	}
	m.SetRecords(func() []*v1alpha1.NodeFault { return records })
	want := `
# HELP faultline_controller_escalation_steps Faults past the first rung of their rule's escalation ladder, by the action and state of the last step reached, from the controller's informer cache (resolved faults excluded).
# TYPE faultline_controller_escalation_steps gauge
faultline_controller_escalation_steps{action="drain",state="Waiting"} 1
faultline_controller_escalation_steps{action="service",state="Done"} 1
# HELP faultline_controller_faults NodeFault records by scope (Node, Fleet), phase and the mode the rule last acted in, from the controller's informer cache.
# TYPE faultline_controller_faults gauge
faultline_controller_faults{mode="",phase="Held",scope="Fleet"} 1
faultline_controller_faults{mode="annotate",phase="Observed",scope="Node"} 1
faultline_controller_faults{mode="enforce",phase="Resolved",scope="Node"} 1
faultline_controller_faults{mode="enforce",phase="Tainted",scope="Node"} 3
`
	if err := testutil.CollectAndCompare(m.Records(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// A record that leaves the cache leaves the gauges at the next scrape.
	records = records[:1]
	if n := testutil.CollectAndCount(m.Records(), "faultline_controller_faults"); n != 1 {
		t.Errorf("%d faults series after the records went, want 1", n)
	}
}

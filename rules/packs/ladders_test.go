package packs_test

import (
	"slices"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
	"github.com/faultline-dev/faultline/rules/stepspec"
	"github.com/faultline-dev/faultline/test/packengine"
)

// hardwareRules are the default rules whose faults mean the hardware (a lost GPU,
// uncorrectable memory errors, NVLink, NVSwitch, GSP and FSP failures): each hands
// its node to the hardware team when the fault comes back after two reboots.
var hardwareRules = map[string][]string{
	"nvidia-xid": {"xid-nvlink5-fatal", "xid-gpu-lost", "xid-gpu-reset-required", "xid-nvlink", "xid-board-hardware", "xid-memory-degraded"},
	"nvidia-driver": {"gpu-fallen-off-bus", "gpu-fallen-off-bus-init", "gpu-lost-checks", "rm-init-adapter-failed", "gsp-rpc-timeout", "gsp-crash",
		"sxid-fatal", "gsp-heartbeat-timeout", "gsp-timeout-report", "gsp-boot-failed", "fsp-failed", "gsp-falcon-ecc-uncorrected",
		"gpu-memory-subsystem-error"},
}

// TestDefaultLaddersDisturbNothing: no step of any default rule's ladder takes
// capacity or moves pods (by the steps' own metadata, rules/stepspec): drains, GPU
// resets and remediation hand-offs are a site's choice (docs/examples). The rules
// that mean hardware carry gpud's rule as data: service after two reboots.
func TestDefaultLaddersDisturbNothing(t *testing.T) {
	ps, err := packs.Load()
	if err != nil {
		t.Fatal(err)
	}
	laddered := map[string][]string{}
	for _, p := range ps {
		for _, r := range p.Spec.Rules {
			for i, s := range r.Escalate {
				spec, ok := stepspec.Get(string(s.Action))
				if !ok || spec.TakesCapacity || spec.EvictsPods {
					t.Errorf("%s/%s: escalate step %d (%s) disturbs the node (known %v, takes capacity %v, evicts pods %v)",
						p.Metadata.Name, r.ID, i+1, s.Action, ok, spec.TakesCapacity, spec.EvictsPods)
				}
			}
			if len(r.Escalate) > 0 {
				laddered[p.Metadata.Name] = append(laddered[p.Metadata.Name], r.ID)
			}
		}
	}
	for pack, ids := range hardwareRules {
		if !slices.Equal(laddered[pack], ids) {
			t.Errorf("pack %s: rules with a ladder %v, want %v", pack, laddered[pack], ids)
		}
	}
	for pack, ids := range laddered {
		if _, ok := hardwareRules[pack]; !ok {
			t.Errorf("pack %s: rules with a ladder %v, want none", pack, ids)
		}
	}

	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	want := []rules.Step{{Action: rules.StepService, Reboots: 2}}
	for pack, ids := range hardwareRules {
		for _, id := range ids {
			r := e.Set().Rule(pack, id)
			if r == nil {
				t.Errorf("%s/%s: not in the default set", pack, id)
				continue
			}
			if !slices.EqualFunc(r.Escalate, want, func(a, b rules.Step) bool {
				return a.Action == b.Action && a.Reboots == b.Reboots && a.Repeat == nil && a.TaintedFor == 0 && !a.ProbeFailed
			}) {
				t.Errorf("%s/%s: ladder %+v, want service after 2 reboots", pack, id, r.Escalate)
			}
		}
	}
}

// TestDefaultLadderOptOut: a site pack takes a default ladder away with an empty
// escalate, or with an action that does not taint, and replaces it with its own.
func TestDefaultLadderOptOut(t *testing.T) {
	site, err := rules.Loader{}.ParseFile("site.yaml", []byte(`apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - {id: xid-gpu-lost, escalate: []}
    - {id: xid-board-hardware, action: event}
    - id: xid-nvlink
      escalate:
        - {action: drain, repeat: {count: 1, window: 1h}}
`))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := packs.LoadForMatching()
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(append(ps, site...))
	if err != nil {
		t.Fatal(err)
	}
	if r := set.Rule("nvidia-xid", "xid-gpu-lost"); len(r.Escalate) != 0 {
		t.Errorf("xid-gpu-lost keeps its ladder: %+v", r.Escalate)
	}
	if r := set.Rule("nvidia-xid", "xid-nvlink"); len(r.Escalate) != 1 || r.Escalate[0].Action != rules.StepDrain {
		t.Errorf("xid-nvlink's ladder: %+v", r.Escalate)
	}
	if r := set.Rule("nvidia-xid", "xid-board-hardware"); r.Action != rules.ActionEvent || len(r.Escalate) != 0 {
		t.Errorf("xid-board-hardware made an event: action %s, ladder %+v", r.Action, r.Escalate)
	}
	if r := set.Rule("nvidia-xid", "xid-gpu-reset-required"); len(r.Escalate) != 1 || r.Escalate[0].Action != rules.StepService {
		t.Errorf("xid-gpu-reset-required lost its ladder: %+v", r.Escalate)
	}
}

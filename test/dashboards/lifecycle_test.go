package dashboards_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/test/eventually"
)

// lifecyclePacks (one file each) give the lifecycle panels data: a rule with a ladder (taint, then
// service on a repeat), a rule in mode annotate, and a pack whose firing on both
// nodes of one rack raises a fleet fault (the controller runs with
// --fleet-min-nodes 2). Their lines match no panel's kernel regex.
var lifecyclePacks = []string{`apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: dashboards-ladder}
spec:
  defaults: {source: kernel, severity: critical, action: taint}
  rules:
    - id: gpu-gone
      match: {regex: 'dashboards-check: GPU \S+ went away'}
      escalate:
        - {action: service, repeat: {count: 1, window: 1h}}
    - id: new-rule
      mode: annotate
      match: {regex: 'dashboards-check: a rule on trial'}
`, `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: dashboards-fleet}
spec:
  defaults: {source: kernel, severity: critical, action: taint}
  rules:
    - id: uplink-lost
      match: {regex: 'dashboards-check: uplink lost'}
`}

const (
	ladderLine = "dashboards-check: GPU 0000:3b:00.0 went away"
	trialLine  = "dashboards-check: a rule on trial"
	uplinkLine = "dashboards-check: uplink lost"
	rackLabel  = "topology.kubernetes.io/rack"
)

// writeLifecyclePacks puts lifecyclePacks in a new --packs directory.
func writeLifecyclePacks(t *testing.T) string {
	dir := t.TempDir()
	for i, p := range lifecyclePacks {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("lifecycle-%d.yaml", i)), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// seedLifecycle gives faults a ladder step, a mode and a fleet scope: gpu-2's Xid
// stand-in climbs to the service step, a rule in trial annotates gpu-2, and once both
// nodes share a rack its uplink loss on both is one fleet fault. The rack label comes
// last, so the earlier faults of the built-in packs on both nodes stay node faults.
func (s *stack) seedLifecycle(t *testing.T) {
	ctx := context.Background()
	cs := s.env.Clientset()
	records, err := nodefault.New(cs, nodefault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	find := func(match func(*v1alpha1.NodeFault) bool) *v1alpha1.NodeFault {
		list, err := records.List(ctx)
		if err != nil {
			return nil
		}
		for i := range list {
			if match(&list[i]) {
				return &list[i]
			}
		}
		return nil
	}
	on := func(node string, lines ...string) logData {
		d := logData{kernel: map[string][]kline{}}
		for _, l := range lines {
			d.kernel[node] = append(d.kernel[node], kline{text: l})
		}
		return d
	}
	s.write(t, on("gpu-2", ladderLine, trialLine))
	eventually.True(t, time.Minute, "gpu-2's ladder fault tainted and the trial rule annotated", func() bool {
		return find(func(nf *v1alpha1.NodeFault) bool {
			return nf.Spec.Rule == "gpu-gone" && nf.Status.Phase == v1alpha1.PhaseTainted
		}) != nil && find(func(nf *v1alpha1.NodeFault) bool { return nf.Spec.Rule == "new-rule" && nf.Status.Mode == "annotate" }) != nil
	})
	s.write(t, on("gpu-2", ladderLine))
	eventually.True(t, time.Minute, "gpu-2's fault at the service step", func() bool {
		return find(func(nf *v1alpha1.NodeFault) bool {
			e := nf.Status.Escalation
			return nf.Spec.Rule == "gpu-gone" && e != nil && e.Action == "service" && e.State == v1alpha1.StepDone
		}) != nil
	})
	patch := []byte(`{"metadata":{"labels":{"` + rackLabel + `":"rack-1"}}}`)
	for _, n := range []string{"gpu-1", "gpu-2"} {
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The controller reads the labels from its Node informer.
	time.Sleep(time.Second)
	d := on("gpu-1", uplinkLine)
	d.add(on("gpu-2", uplinkLine))
	s.write(t, d)
	eventually.True(t, time.Minute, "rack-1's fleet fault", func() bool {
		return find(func(nf *v1alpha1.NodeFault) bool {
			return nf.Spec.Scope == v1alpha1.ScopeFleet && nf.Spec.Pack == "dashboards-fleet" && len(nf.Status.Members) > 0
		}) != nil
	})
	s.waitShipped(t)
}

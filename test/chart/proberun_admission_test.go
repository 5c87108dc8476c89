package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/test/eventually"
)

// TestProbeRunForcePolicy installs the ProbeRun CRD and the chart's policy
// <release>-proberun-force in a real apiserver: an identity that may create
// ProbeRuns but not proberuns/force is refused a run with force: true and may
// create one without; with proberuns/force (faultline-operator) force passes.
func TestProbeRunForcePolicy(t *testing.T) {
	env, _ := startWithPolicy(t, "faultline-proberun-force")
	env.InstallCRD(t, v1alpha1.CRDYAML)
	ctx := context.Background()
	as := func(name string, resources ...string) rest.Interface {
		t.Helper()
		rc, _ := faultlineClientAs(t, env, name, []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: resources, Verbs: []string{"create"}}},
			authorizationv1.ResourceAttributes{Group: v1alpha1.Group, Verb: "create", Resource: v1alpha1.ProbeRunResource})
		return rc
	}
	create := func(rc rest.Interface, force bool, dryRun bool) error {
		req := rc.Post().Resource(v1alpha1.ProbeRunResource).Body(&v1alpha1.ProbeRun{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
			Spec: v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-1"}, Checks: []string{"dcgm"}, Force: force}})
		if dryRun {
			req = req.Param("dryRun", "All")
		}
		return req.Do(ctx).Error()
	}
	runner := as("runner", v1alpha1.ProbeRunResource)
	forcer := as("forcer", v1alpha1.ProbeRunResource, v1alpha1.ProbeRunResource+"/force")
	// The policy reaches admission asynchronously: wait with dry runs.
	eventually.True(t, 30*time.Second, "the policy refusing force without proberuns/force", func() bool {
		return create(runner, true, true) != nil
	})
	if err := create(runner, true, false); err == nil || !strings.Contains(err.Error(), "needs create on proberuns/force") {
		t.Errorf("force without proberuns/force: %v, want refused by the policy", err)
	}
	if err := create(runner, false, false); err != nil {
		t.Errorf("a run without force: %v", err)
	}
	if err := create(forcer, true, false); err != nil {
		t.Errorf("force with proberuns/force: %v", err)
	}
}

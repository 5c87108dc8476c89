package chart

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestShards: controller.shards renders one controller Deployment per shard, each
// with its shard's flags, its own pods, PodDisruptionBudget and checkpoint, and the
// Role grants each shard's Lease and checkpoint by name; without shards the one
// controller has no shard flag.
func TestShards(t *testing.T) {
	testenv.Integration(t)
	c := caseNamed(t, "defaults")
	c.name, c.valuesFile = "shards", "shards.yaml"
	lint := []string{"lint", "--strict", filepath.Join(repoRoot(t), chartDir), "-f", filepath.Join(repoRoot(t), "test", "chart", "testdata", c.valuesFile)}
	if out, err := helm(t, lint...); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	objs := parse(t, render(t, c))
	full := c.release // the release name is the chart's full name
	if objs.find("Deployment", full+"-otel-collector") == nil {
		t.Fatalf("full name %q: no %s-otel-collector; have %v", full, full, objs.names("Deployment"))
	}
	if objs.find("Deployment", full+"-controller") != nil {
		t.Errorf("sharded, but the unsharded Deployment %s-controller is rendered too", full)
	}
	want := map[string][]string{
		"a": {"--shard-label=cloud.example.com/pool", "--shard=pool_A", "--shard-name=a", `--shard-stream-matcher=node=~"gpu-a-.*"`, "--budget-max=0"},
		"b": {"--shard-label=cloud.example.com/pool", "--shard=pool-b", "--shard-name=b", "--shard-default-except=pool_A", "--budget-max=5"},
	}
	pods := map[string]labels.Set{}
	for shard, args := range want {
		d := deployment(t, objs, full+"-controller-"+shard)
		ctl := container(t, &d.Spec.Template.Spec, "controller")
		for _, a := range args {
			if !hasArg(ctl, a) {
				t.Errorf("shard %s: no %s in %q", shard, a, ctl.Args)
			}
		}
		if shard == "a" {
			if _, ok := argWithPrefix(ctl, "--shard-default-except"); ok {
				t.Errorf("shard a is not the default shard, but has %q", ctl.Args)
			}
		}
		pods[shard] = d.Spec.Template.Labels
		for other, l := range pods {
			sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
			if other != shard && sel.Matches(l) {
				t.Errorf("Deployment of shard %s selects the pods of shard %s", shard, other)
			}
		}
		if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("shard %s: the selector does not select its own pods", shard)
		}
		pdb := objs.find("PodDisruptionBudget", full+"-controller-"+shard)
		if pdb == nil {
			t.Errorf("no PodDisruptionBudget for shard %s", shard)
		}
		if objs.find("ConfigMap", controller.DefaultCheckpointName+"-"+shard) == nil {
			t.Errorf("no checkpoint ConfigMap for shard %s", shard)
		}
	}
	if a, b := pods["a"], pods["b"]; reflect.DeepEqual(a, b) {
		t.Errorf("both shards' pods carry the same labels %v", a)
	}
	role := get[rbacv1.Role](t, objs, "Role", full+"-controller")
	names := map[string][]string{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			names[res] = append(names[res], r.ResourceNames...)
		}
	}
	// The names the controller derives from --shard-name (cmd/faultline/shard.go).
	lease, cp := controller.DefaultLeaseName+"-", controller.DefaultCheckpointName+"-"
	if got, want := names["leases"], []string{lease + "a", lease + "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Role grants the Leases %v, want the shards' %v", got, want)
	}
	if got, want := names["configmaps"], []string{cp + "a", cp + "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Role grants the ConfigMaps %v, want the shards' %v", got, want)
	}

	// Without shards: one controller, no shard flag.
	d := deployment(t, parse(t, render(t, caseNamed(t, "defaults"))), full+"-controller")
	for _, a := range container(t, &d.Spec.Template.Spec, "controller").Args {
		if strings.HasPrefix(a, "--shard") {
			t.Errorf("unsharded controller has %s", a)
		}
	}
}

func TestShardsRejected(t *testing.T) {
	testenv.Integration(t)
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"one shard", []string{"controller.shards[0].name=a", "controller.shards[0].value=x"}, "at least two shards"},
		{"same name", []string{"controller.shards[0].name=a", "controller.shards[0].value=x", "controller.shards[1].name=a", "controller.shards[1].value=y"}, "must be unique"},
		{"same value", []string{"controller.shards[0].name=a", "controller.shards[0].value=x", "controller.shards[1].name=b", "controller.shards[1].value=x"}, "must be unique"},
		{"two defaults", []string{"controller.shards[0].name=a", "controller.shards[0].value=x", "controller.shards[0].default=true",
			"controller.shards[1].name=b", "controller.shards[1].value=y", "controller.shards[1].default=true"}, "only one shard may be the default"},
		{"name not a DNS label", []string{"controller.shards[0].name=A_1", "controller.shards[0].value=x", "controller.shards[1].name=b", "controller.shards[1].value=y"}, "/controller/shards/0/name"},
		{"no value", []string{"controller.shards[0].name=a", "controller.shards[1].name=b", "controller.shards[1].value=y"}, "missing property 'value'"},
	} {
		t.Run(tc.name, func(t *testing.T) { mustRefuse(t, tc.sets, tc.want) })
	}
}

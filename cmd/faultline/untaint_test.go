package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/testenv"
)

// untaint --direct writes the Node itself (no controller runs) and says what it did:
// a sentence by default, one object (controller.UntaintResponse) in json and yaml.
// The default, a request on each NodeFault, is TestRequests' (controller).
func TestUntaintDirect(t *testing.T) {
	testenv.Integration(t)
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	env.InstallCRD(t, v1alpha1.CRDYAML)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := env.Clientset()
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	actor, err := act.New(client, act.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := actor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer actor.Shutdown()
	r := &rules.Compiled{Pack: "nvidia-xid", ID: "xid-79", Source: rules.SourceKernel, Severity: rules.SeverityCritical,
		Action: rules.ActionTaint, Taint: rules.Taint{Key: rules.DefaultTaintKey, Value: "xid-79", Effect: "NoSchedule"}}
	taint := func() {
		t.Helper()
		if _, err := actor.TaintNode(ctx, fault.Fault{Node: "gpu-1", Rule: r, Count: 1, Time: time.Now()}, "boot-1"); err != nil {
			t.Fatal(err)
		}
	}
	untaint := func(args ...string) string {
		t.Helper()
		out, err := run(t, "", append([]string{"untaint", "gpu-1", "--direct", "--kubeconfig", env.Kubeconfig()}, args...)...)
		if err != nil {
			t.Fatalf("untaint %v: %v\n%s", args, err, out)
		}
		return out
	}
	// The direct untaint is another client's write: the actor's caches learn of it
	// from their watches, and a taint decided on a cache that still shows the old
	// taint adds nothing. Wait until they show the node clean.
	settled := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := actor.Nodes().Get("gpu-1")
			active, lerr := actor.ListActive()
			clean := err == nil && lerr == nil && len(active) == 0
			if err == nil {
				for _, tn := range n.Spec.Taints {
					if tn.Key == rules.DefaultTaintKey {
						clean = false
					}
				}
			}
			if clean {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the actor's caches still show gpu-1 tainted after the direct untaint (node err %v, list err %v, active %d)", err, lerr, len(active))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, o := range []string{"text", "json", "yaml"} {
		taint()
		direct := untaint("-o", o)
		settled()
		var got controller.UntaintResponse
		switch o {
		case "text":
			if want := "node gpu-1: removed 1 taint (faultline.io/faulty=xid-79:NoSchedule), resolved 1 fault record (nvidia-xid/xid-79)\n"; direct != want {
				t.Errorf("text: %q, want %q", direct, want)
			}
			continue
		case "json":
			err = json.Unmarshal([]byte(direct), &got)
		case "yaml":
			err = yaml.UnmarshalStrict([]byte(direct), &got)
		}
		if err != nil {
			t.Fatalf("-o %s: %v\n%s", o, err, direct)
		}
		if got.Node != "gpu-1" || got.Rule != "*" || len(got.RemovedTaints) != 1 || got.RemovedTaints[0] != "faultline.io/faulty=xid-79:NoSchedule" ||
			len(got.ResolvedFaults) != 1 || got.ResolvedFaults[0] != "nvidia-xid/xid-79" {
			t.Errorf("-o %s: %+v", o, got)
		}
	}
	// Nothing left to untaint: said so.
	want := "node gpu-1: no fault of faultline's recorded, nothing removed\n"
	if direct := untaint(); direct != want {
		t.Errorf("nothing to untaint: %q, want %q", direct, want)
	}
	if out := untaint("--rule", "nvidia-xid/xid-79", "-o", "json"); !strings.Contains(out, `"removedTaints": []`) {
		t.Errorf("json of nothing removed: %s", out)
	}
}

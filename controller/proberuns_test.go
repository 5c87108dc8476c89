package controller_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/proberunctl"
	"github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/test/testenv"
)

// probeRunsAs is a faultline.io client with the credentials of kubeconfig.
func probeRunsAs(t *testing.T, kubeconfig string) rest.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := v1alpha1.NewRESTClient(cs)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func createProbeRun(rc rest.Interface, spec v1alpha1.ProbeRunSpec) (*v1alpha1.ProbeRun, error) {
	out := &v1alpha1.ProbeRun{}
	err := rc.Post().Resource(v1alpha1.ProbeRunResource).Body(&v1alpha1.ProbeRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}, Spec: spec}).Do(context.Background()).Into(out)
	return out, err
}

// waitProbeRun waits until the run is finished and returns it.
func (cl *cluster) waitProbeRun(rc rest.Interface, name string, timeout time.Duration) *v1alpha1.ProbeRun {
	cl.t.Helper()
	pr := &v1alpha1.ProbeRun{}
	cl.waitFor("proberun "+name+" finished", timeout, func() bool {
		pr = &v1alpha1.ProbeRun{}
		return rc.Get().Resource(v1alpha1.ProbeRunResource).Name(name).Do(context.Background()).Into(pr) == nil && pr.Status.Finished()
	})
	return pr
}

func nodeOf(pr *v1alpha1.ProbeRun, node string) v1alpha1.ProbeRunNode {
	for _, n := range pr.Status.Nodes {
		if n.Node == node {
			return n
		}
	}
	return v1alpha1.ProbeRunNode{}
}

// A ProbeRun is authorized by the API server: a viewer may not create one (403);
// an operator's runs on real probe agents and its status holds the verdicts,
// node by node; a run the controller cannot start is Refused with the reason;
// kubectl get proberuns lists it with its printer columns.
func TestProbeRunObjects(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	r := cl.start(options{probes: s.probeConfig()})
	viewer, _, err := rbac.APIRoles()
	if err != nil {
		t.Fatal(err)
	}
	asViewer := probeRunsAs(t, cl.kubeconfigFor(cl.apiUser("viewer", viewer)))
	opKubeconfig := cl.kubeconfigFor(cl.operator())
	asOperator := probeRunsAs(t, opKubeconfig)

	spec := v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-a", "gpu-b"}, Checks: []string{"pciebw"},
		Params: map[string]map[string]string{"pciebw": {"floor_gbps": "5"}}}
	if _, err := createProbeRun(asViewer, spec); !apierrors.IsForbidden(err) {
		t.Fatalf("a viewer's ProbeRun: %v, want 403", err)
	}
	if err := asViewer.Get().Resource(v1alpha1.ProbeRunResource).Do(context.Background()).Error(); err != nil {
		t.Errorf("a viewer lists ProbeRuns: %v", err)
	}
	created, err := createProbeRun(asOperator, spec)
	if err != nil {
		t.Fatalf("an operator's ProbeRun: %v", err)
	}
	pr := cl.waitProbeRun(asOperator, created.Name, time.Minute)
	a, b := nodeOf(pr, "gpu-a"), nodeOf(pr, "gpu-b")
	if pr.Status.Phase != v1alpha1.ProbeRunCompleted || pr.Status.Verdict != "fail" || pr.Status.Passed != 1 || pr.Status.Failed != 1 ||
		pr.Status.NodeCount != 2 || pr.Status.ObservedGeneration != pr.Generation || pr.Status.Owner != "replica-a" ||
		!a.Done || a.Verdict != "fail" || !b.Done || b.Verdict != "pass" || len(a.Results) != 1 || a.Results[0].Params["floor_gbps"] != "5" {
		t.Fatalf("run status: %+v", pr.Status)
	}
	slow := false
	for _, d := range a.Results[0].Devices {
		slow = slow || (d.ID == "3" && d.Values["h2d_gbps"] == "2" && d.Status == "fail")
	}
	if !slow || a.StartTime == nil || a.CompletionTime == nil || a.Results[0].Duration == nil {
		t.Errorf("gpu-a: %+v", a)
	}
	// The spec is a record of what was asked: it cannot change, even for an admin.
	admin, err := v1alpha1.NewRESTClient(cl.cs)
	if err != nil {
		t.Fatal(err)
	}
	pr.Spec.Checks = []string{"nvml"}
	if err := admin.Put().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).Body(pr).Do(context.Background()).Error(); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("changing the spec: %v, want refused as immutable", err)
	}

	// Bad specs are refused before anything runs: by the API server (nodes and a
	// selector), or by the controller (Refused, InvalidSpec, saying why).
	before := len(r.c.Triggers().Dispatcher().List())
	if _, err := createProbeRun(asOperator, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-a"}, Checks: []string{"nvml"},
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"nvidia.com/gpu.present": "true"}}}); !apierrors.IsInvalid(err) {
		t.Errorf("a run with nodes and a selector: %v, want refused as invalid", err)
	}
	for _, tc := range []struct {
		spec v1alpha1.ProbeRunSpec
		want string
	}{
		{v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-a"}, Checks: []string{"pciebw"}, Params: map[string]map[string]string{"pciebw": {"floor_gbps": "-3"}}}, "floor_gbps"},
		{v1alpha1.ProbeRunSpec{Nodes: []string{"no-such-node"}, Checks: []string{"pciebw"}}, "no-such-node"},
		{v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-a"}, Checks: []string{"format-disk"}}, "unknown check"},
	} {
		bad, err := createProbeRun(asOperator, tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		bad = cl.waitProbeRun(asOperator, bad.Name, 30*time.Second)
		if c := findCond(bad.Status.Conditions, v1alpha1.ProbeRunAccepted); bad.Status.Phase != v1alpha1.ProbeRunRefused || c == nil ||
			c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, tc.want) || len(bad.Status.Nodes) != 0 {
			t.Errorf("%+v: %+v, want Refused (%s) saying %q", tc.spec, bad.Status, v1alpha1.ReasonInvalidSpec, tc.want)
		}
	}

	// A node without an agent (gpu-c): refused, naming it, and nothing ran on the others.
	bad, err := createProbeRun(asOperator, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-a", "gpu-c"}, Checks: []string{"pciebw"}})
	if err != nil {
		t.Fatal(err)
	}
	bad = cl.waitProbeRun(asOperator, bad.Name, 30*time.Second)
	if c := findCond(bad.Status.Conditions, v1alpha1.ProbeRunAccepted); bad.Status.Phase != v1alpha1.ProbeRunRefused || c == nil ||
		c.Reason != v1alpha1.ReasonNoProbeAgent || !strings.Contains(c.Message, "run no probe agent, nothing started: gpu-c") || len(bad.Status.Nodes) != 0 {
		t.Errorf("a run on a node without an agent: %+v", bad.Status)
	}
	if n := len(r.c.Triggers().Dispatcher().List()); n != before {
		t.Errorf("%d runs in the dispatcher after the refusals, %d before", n, before)
	}

	out, err := exec.Command(testenv.Binary(t, "kubectl"), "--kubeconfig", opKubeconfig, "get", "proberuns").CombinedOutput()
	if err != nil || !strings.Contains(string(out), created.Name) || !strings.Contains(string(out), "PASSED") ||
		!strings.Contains(string(out), "Completed") || !strings.Contains(string(out), "Refused") {
		t.Errorf("kubectl get proberuns: %v\n%s", err, out)
	}
	t.Logf("kubectl get proberuns:\n%s", out)
}

func findCond(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// A run survives its leader: replica-a runs a ProbeRun one node at a time; gpu-a's
// result is in the status when replica-a is killed while gpu-b's agent has not
// answered; replica-b takes over, runs gpu-b only and completes the run, keeping
// gpu-a's result.
func TestProbeRunSurvivesLeaderKill(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	bin := testenv.BuildFaultline(t)
	hang, asked := hangingAgent(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(s.token), 0o600); err != nil {
		t.Fatal(err)
	}
	replica := func(id string, agents map[string]string) *exec.Cmd {
		args := []string{"--listen", testenv.FreeAddr(t), "--probe-agent-port", "0", "--probe-token-file", tokenFile, "--pvc-probe=false",
			"--probe-schedule", "nvml=0"}
		for node, u := range agents {
			args = append(args, "--probe-agent", node+"="+u)
		}
		return startReplica(t, cl, bin, id, args...)
	}
	a := replica("replica-a", map[string]string{"gpu-a": s.agents["gpu-a"], "gpu-b": hang})
	rc := probeRunsAs(t, cl.kubeconfigFor(cl.operator()))
	created, err := createProbeRun(rc, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-a", "gpu-b"}, Checks: []string{"pciebw"}, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(60 * time.Second):
		t.Fatal("gpu-b's (hanging) agent was never asked")
	}
	cl.waitFor("gpu-a's result in the status", 30*time.Second, func() bool {
		pr := &v1alpha1.ProbeRun{}
		return rc.Get().Resource(v1alpha1.ProbeRunResource).Name(created.Name).Do(context.Background()).Into(pr) == nil &&
			nodeOf(pr, "gpu-a").Done && !nodeOf(pr, "gpu-b").Done && pr.Status.Phase == v1alpha1.ProbeRunRunning
	})
	_ = a.Process.Signal(syscall.SIGKILL)
	_ = a.Wait()

	replica("replica-b", s.agents)
	pr := cl.waitProbeRun(rc, created.Name, 90*time.Second)
	ga, gb := nodeOf(pr, "gpu-a"), nodeOf(pr, "gpu-b")
	if pr.Status.Phase != v1alpha1.ProbeRunCompleted || pr.Status.Owner != "replica-b" || !ga.Done || ga.Verdict != "fail" ||
		!gb.Done || gb.Verdict != "pass" || pr.Status.Passed != 1 || pr.Status.Failed != 1 {
		t.Fatalf("after the takeover: %+v", pr.Status)
	}
	if c := findCond(pr.Status.Conditions, v1alpha1.ProbeRunAccepted); c == nil || c.Reason != v1alpha1.ReasonResumed {
		t.Errorf("Accepted condition: %+v, want reason %s", c, v1alpha1.ReasonResumed)
	}
}

// Every run is a ProbeRun: a rule's confirmation and a scheduled round, which the
// controller starts itself, each leave a record (spec.trigger rule or schedule, the
// verdicts node by node in its status, written by the replica that ran it) that no
// controller runs again; the retention deletes them as it deletes runs by hand.
func TestProbeRunRecords(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	pc := s.probeConfig()
	pc.Schedules = []trigger.Schedule{{Check: "nvml", Every: 2 * time.Second}}
	const retention = 5 * time.Second
	r := cl.start(options{probes: pc, probeRunRetention: retention})
	admin, err := v1alpha1.NewRESTClient(cl.cs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl.push("gpu-a", time.Now(), aerNonFatal)

	// find waits for a finished record of trigger whose status passes ok.
	find := func(trig string, ok func(pr *v1alpha1.ProbeRun) bool) *v1alpha1.ProbeRun {
		t.Helper()
		var found *v1alpha1.ProbeRun
		cl.waitFor("a finished "+trig+" record", time.Minute, func() bool {
			list := &v1alpha1.ProbeRunList{}
			if err := admin.Get().Resource(v1alpha1.ProbeRunResource).Do(ctx).Into(list); err != nil {
				return false
			}
			for i := range list.Items {
				pr := &list.Items[i]
				if pr.Spec.Trigger == trig && pr.Status.Finished() && ok(pr) {
					found = pr
					return true
				}
			}
			return false
		})
		if id := r.id; found.Annotations[v1alpha1.AnnotationRecord] != id || found.Status.Owner != id || found.Labels[proberunctl.LabelRun] == "" {
			t.Errorf("%s record %s: annotation %q, owner %q, run label %q; want the replica %s", trig, found.Name,
				found.Annotations[v1alpha1.AnnotationRecord], found.Status.Owner, found.Labels[proberunctl.LabelRun], id)
		}
		return found
	}

	// The rule's confirmation: pciebw failed on gpu-a.
	rule := find("rule", func(pr *v1alpha1.ProbeRun) bool { return nodeOf(pr, "gpu-a").Done })
	a := nodeOf(rule, "gpu-a")
	failedCheck := false
	for _, res := range a.Results {
		failedCheck = failedCheck || (res.Check == "pciebw" && res.Status == "fail")
	}
	if rule.Status.Phase != v1alpha1.ProbeRunCompleted || rule.Status.Verdict != "fail" || rule.Status.NodeCount != 1 ||
		!strings.Contains(rule.Spec.Reason, aerRule) || !failedCheck || !strings.HasPrefix(rule.Name, "rule-") {
		t.Errorf("the rule's record %s: spec %+v, status %+v", rule.Name, rule.Spec, rule.Status)
	}

	// A scheduled round: one record over every probe node (gpu-c and gpu-d run no
	// agent: their error is recorded, not hidden).
	round := find("schedule", func(pr *v1alpha1.ProbeRun) bool { return true })
	if round.Status.Phase != v1alpha1.ProbeRunCompleted || round.Status.NodeCount != 4 || round.Spec.Reason != "every 2s" ||
		len(nodeOf(round, "gpu-b").Results) != 1 || nodeOf(round, "gpu-b").Results[0].Check != "nvml" || nodeOf(round, "gpu-c").Error == "" {
		t.Errorf("the scheduled round's record %s: spec %+v, status %+v", round.Name, round.Spec, round.Status)
	}

	// No record was run again as a run by hand.
	for _, run := range r.c.Triggers().Dispatcher().List() {
		if run.Trigger == proberun.TriggerManual {
			t.Errorf("a record was run again: %+v", run)
		}
	}

	// Both go after the retention.
	for _, pr := range []*v1alpha1.ProbeRun{rule, round} {
		cl.waitFor(pr.Name+" deleted after its retention", 30*time.Second, func() bool {
			return apierrors.IsNotFound(admin.Get().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).Do(ctx).Error())
		})
	}
}

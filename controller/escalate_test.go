package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/escalate"
)

// ladderPack: a repeated Xid climbs taint → drain → service; another rule hands
// its node to a remediation operator on its first repeat.
const ladderPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  defaults: {source: kernel, severity: critical, action: taint}
  rules:
    - id: ladder-xid
      match: {regex: 'ladder-check: GPU (?P<pci>\S+) fell off the bus'}
      escalate:
        - {action: drain, repeat: {count: 1, window: 1h}}
        - {action: service, repeat: {count: 1, window: 1h}}
    - id: ladder-remediate
      match: {regex: 'ladder-check: node needs a reboot'}
      escalate:
        - {action: remediate, repeat: {count: 1, window: 1h}, template: self-node}
`

const xidLine = "ladder-check: GPU 0000:3b:00.0 fell off the bus"

// snrCRD is a small stand-in of a remediation operator's kind
// (SelfNodeRemediation), enough for the apiserver to store objects of it.
const snrCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: selfnoderemediations.remediation.medik8s.io}
spec:
  group: remediation.medik8s.io
  scope: Namespaced
  names: {plural: selfnoderemediations, singular: selfnoderemediation, kind: SelfNodeRemediation}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

const snrTemplate = `apiVersion: remediation.medik8s.io/v1alpha1
kind: SelfNodeRemediation
metadata:
  name: "{{.Node}}"
  annotations: {faultline.io/rule: "{{.Pack}}/{{.Rule}}"}
spec:
  remediationStrategy: ResourceDeletion
`

// runningPod creates a Running pod of a ReplicaSet on node (no kubelet: the
// status is written here), so a drain evicts it and a PDB can guard it.
func (cl *cluster) runningPod(node, name string, rs *appsv1.ReplicaSet) {
	cl.t.Helper()
	ctx := context.Background()
	ctrl := true
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": rs.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "train"}}}}
	p, err := cl.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cl.cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		cl.t.Fatal(err)
	}
}

func (cl *cluster) replicaSet(name string) *appsv1.ReplicaSet {
	cl.t.Helper()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "train"}}}}}}
	rs, err := cl.cs.AppsV1().ReplicaSets("default").Create(context.Background(), rs, metav1.CreateOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	return rs
}

func (cl *cluster) podExists(name string) bool {
	_, err := cl.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// escalation reads the escalation record of a fault ("" state when none).
func (cl *cluster) escalation(node, rule string) v1alpha1.Escalation {
	nf, err := cl.record(node, "site", rule)
	if err != nil || nf.Status.Escalation == nil {
		return v1alpha1.Escalation{}
	}
	return *nf.Status.Escalation
}

// TestEscalationLadder, with the real apiserver and Loki: a repeated Xid climbs
// the ladder (taint, then a drain that evicts the node's pods, then service: label
// and condition), recorded step by step in the NodeFault and shown by `kubectl get
// nodefaults`; a PodDisruptionBudget blocks the drain of another node, whose step
// waits (recorded) and completes once the budget allows it; a remediation object is
// created from the template, once.
func TestEscalationLadder(t *testing.T) {
	cl := newCluster(t, "gpu-0", "gpu-1", "gpu-2", "gpu-3")
	cl.env.InstallCRD(t, []byte(snrCRD))
	dir, tmpl := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(ladderPack), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmpl, "self-node.yaml"), []byte(snrTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := cl.env.RESTConfig()
	rem, err := act.NewRemediator(dynamic.NewForConfigOrDie(cfg), cl.cs.Discovery(), tmpl, ns)
	if err != nil {
		t.Fatal(err)
	}
	rs := cl.replicaSet("trainer")
	cl.runningPod("gpu-0", "trainer-a", rs)
	cl.runningPod("gpu-0", "trainer-b", rs)
	guarded := cl.replicaSet("guarded")
	cl.runningPod("gpu-1", "guarded-a", guarded)
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	if _, err := cl.cs.PolicyV1().PodDisruptionBudgets("default").Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := 0
	r := cl.start(options{packs: []string{dir}, decide: decide.Config{MaxPercent: 100, DisableStorm: true},
		escalate: controller.EscalationConfig{Remediator: rem, DrainTimeout: 2 * time.Second, DrainGraceSeconds: &zero}})

	// Rung 0: the first Xid taints.
	cl.push("gpu-0", time.Now(), xidLine)
	cl.push("gpu-1", time.Now(), xidLine)
	cl.waitFor("gpu-0 and gpu-1 tainted", 20*time.Second, func() bool { return cl.tainted("gpu-0") && cl.tainted("gpu-1") })
	if !cl.podExists("trainer-a") || cl.escalation("gpu-0", "ladder-xid").Step != 0 {
		t.Fatalf("the first firing went past the taint: %+v", cl.escalation("gpu-0", "ladder-xid"))
	}

	// Rung 1: the Xid again drains gpu-0; the PDB keeps gpu-1's pod, and its step waits.
	cl.push("gpu-0", time.Now(), xidLine)
	cl.push("gpu-1", time.Now(), xidLine)
	cl.waitFor("gpu-0 drained", 30*time.Second, func() bool {
		e := cl.escalation("gpu-0", "ladder-xid")
		return e.Step == 1 && e.State == v1alpha1.StepDone
	})
	if cl.podExists("trainer-a") || cl.podExists("trainer-b") {
		t.Errorf("gpu-0's pods are still there after its drain")
	}
	e := cl.escalation("gpu-0", "ladder-xid")
	if e.Action != "drain" || !strings.Contains(e.Message, "2 pod(s) evicted (default/trainer-a, default/trainer-b)") || !strings.Contains(e.Reason, "fired 1 time(s)") || e.Time == nil {
		t.Errorf("gpu-0's drain step: %+v", e)
	}
	cl.waitFor("gpu-1's drain waits on its PDB", 30*time.Second, func() bool {
		e := cl.escalation("gpu-1", "ladder-xid")
		return e.Step == 1 && e.State == v1alpha1.StepWaiting
	})
	if e := cl.escalation("gpu-1", "ladder-xid"); !strings.Contains(e.Message, "PodDisruptionBudget default/guarded") || !cl.podExists("guarded-a") {
		t.Errorf("gpu-1's waiting drain: %+v (pod there: %v)", e, cl.podExists("guarded-a"))
	}
	// The reconcile loop tries again: once the budget is gone the drain completes.
	if err := cl.cs.PolicyV1().PodDisruptionBudgets("default").Delete(context.Background(), "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.waitFor("gpu-1 drained after the PDB went", 30*time.Second, func() bool {
		e := cl.escalation("gpu-1", "ladder-xid")
		return e.Step == 1 && e.State == v1alpha1.StepDone && !cl.podExists("guarded-a")
	})

	decided := func(action, result string) float64 {
		return testutil.ToFloat64(r.m.Decisions().WithLabelValues(action, result, "enforce"))
	}
	if d, w := decided("escalate-drain", "ok"), decided("escalate-drain", "waiting"); d != 2 || w != 1 {
		t.Errorf("decisions{escalate-drain}: ok %v (want 2), waiting %v (want 1: the retries of the wait are not counted)", d, w)
	}

	// Rung 2: once more, and gpu-0 goes to service.
	cl.push("gpu-0", time.Now(), xidLine)
	cl.waitFor("gpu-0 in service", 30*time.Second, func() bool {
		e := cl.escalation("gpu-0", "ladder-xid")
		return e.Step == 2 && e.State == v1alpha1.StepDone
	})
	n := cl.node("gpu-0")
	if n.Labels[act.LabelService] != "required" {
		t.Errorf("gpu-0 labels %v, want %s=required", n.Labels, act.LabelService)
	}
	var cond *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == act.ConditionService {
			cond = &n.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionTrue || !strings.Contains(cond.Message, "site/ladder-xid") || !strings.Contains(cond.Message, "fell off the bus") {
		t.Errorf("gpu-0's %s condition: %+v", act.ConditionService, cond)
	}
	// Events are sent asynchronously, after the step's write this waited for.
	cl.waitFor("gpu-0's two Escalated Events", 10*time.Second, func() bool {
		return len(cl.events("gpu-0", escalate.ReasonEscalated)) >= 2
	})
	// Three lines: three firings, each counted once (the taint decision's and the
	// ladder's writes of the first), one match each; the first line kept; the
	// ladder's Events on the record too.
	nf0, err := cl.record("gpu-0", "site", "ladder-xid")
	if err != nil {
		t.Fatal(err)
	}
	if st := nf0.Status; st.Firings != 3 || st.Count != 1 || len(st.Evidence) != 3 || st.Evidence[0].Text != xidLine {
		t.Errorf("gpu-0's record after three lines: firings %d, count %d, evidence %+v", st.Firings, st.Count, st.Evidence)
	}
	cl.waitFor("gpu-0's Escalated Events on its NodeFault", 10*time.Second, func() bool {
		return len(cl.recordEvents(nf0, escalate.ReasonEscalated)) >= 2
	})

	// The remediate step: the object from the template, once.
	cl.push("gpu-2", time.Now(), "ladder-check: node needs a reboot")
	cl.waitFor("gpu-2 tainted", 20*time.Second, func() bool { return cl.tainted("gpu-2") })
	cl.push("gpu-2", time.Now(), "ladder-check: node needs a reboot")
	snr := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "remediation.medik8s.io", Version: "v1alpha1", Resource: "selfnoderemediations"}).Namespace(ns)
	cl.waitFor("gpu-2's remediation step done", 30*time.Second, func() bool {
		e := cl.escalation("gpu-2", "ladder-remediate")
		return e.Step == 1 && e.State == v1alpha1.StepDone
	})
	list, err := snr.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("SelfNodeRemediations: %v, %v", list, err)
	}
	o := list.Items[0]
	if o.GetName() != "gpu-2" || o.GetAnnotations()["faultline.io/rule"] != "site/ladder-remediate" || o.GetLabels()[act.LabelFault] == "" ||
		len(o.GetOwnerReferences()) != 1 || o.GetOwnerReferences()[0].Kind != "NodeFault" {
		t.Errorf("the remediation object: %+v", o.Object)
	}
	// Asked again (a later leader, a lost write), it finds the object instead of a second.
	name, created, err := rem.Remediate(context.Background(), "self-node", act.TemplateData{Node: "gpu-2", Rule: "ladder-remediate", Pack: "site",
		Fault: o.GetLabels()[act.LabelFault]}, nil)
	if err != nil || created || name != "gpu-2" {
		t.Errorf("remediate again: %s created=%v, %v", name, created, err)
	}

	// kubectl get nodefaults shows the step.
	tbl := nodeFaultTable(t, cl)
	col := map[string]int{}
	for i, c := range tbl.ColumnDefinitions {
		col[c.Name] = i
	}
	steps := map[string]string{}
	for _, row := range tbl.Rows {
		n, _ := row.Cells[col["Node"]].(string)
		steps[n], _ = row.Cells[col["Step"]].(string)
	}
	if steps["gpu-0"] != "service" || steps["gpu-1"] != "drain" || steps["gpu-2"] != "remediate" {
		t.Errorf("kubectl get nodefaults: node -> step %v", steps)
	}
}

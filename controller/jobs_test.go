package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/workloads"
)

// workloadsFixture creates, in namespace ml, the objects a pod's owner references
// name, as their controllers would have (none runs here).
type workloadsFixture struct {
	cl *cluster
	ns string
}

func (w *workloadsFixture) ctx() context.Context { return context.Background() }

func (w *workloadsFixture) fatal(err error) {
	w.cl.t.Helper()
	if err != nil {
		w.cl.t.Fatal(err)
	}
}

func controllerRef(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
}

var podTemplate = corev1.PodTemplateSpec{
	ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
	Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
}

// job creates the Job name owned by the CronJob cron (created too).
func (w *workloadsFixture) cronJob(cron, name string) *batchv1.Job {
	cj, err := w.cl.cs.BatchV1().CronJobs(w.ns).Create(w.ctx(), &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: cron},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate}}}},
		metav1.CreateOptions{})
	w.fatal(err)
	j, err := w.cl.cs.BatchV1().Jobs(w.ns).Create(w.ctx(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: controllerRef("batch/v1", "CronJob", cron, cj.UID)},
		Spec:       batchv1.JobSpec{Template: podTemplate}}, metav1.CreateOptions{})
	w.fatal(err)
	return j
}

// replicaSet creates the ReplicaSet name owned by the Deployment deploy (created too).
func (w *workloadsFixture) replicaSet(deploy, name string) *appsv1.ReplicaSet {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	tmpl := podTemplate
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	d, err := w.cl.cs.AppsV1().Deployments(w.ns).Create(w.ctx(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deploy},
		Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	w.fatal(err)
	rs, err := w.cl.cs.AppsV1().ReplicaSets(w.ns).Create(w.ctx(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: controllerRef("apps/v1", "Deployment", deploy, d.UID)},
		Spec:       appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	w.fatal(err)
	return rs
}

// pod creates a pod bound to node, requesting gpus GPUs (none: no GPU resource),
// with owners.
func (w *workloadsFixture) pod(name, node string, gpus int64, owners []metav1.OwnerReference) *corev1.Pod {
	res := corev1.ResourceRequirements{}
	if gpus > 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		res.Limits = corev1.ResourceList{"nvidia.com/gpu": q}
	}
	p, err := w.cl.cs.CoreV1().Pods(w.ns).Create(w.ctx(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: res}}}}, metav1.CreateOptions{})
	w.fatal(err)
	return p
}

// finish marks a pod Succeeded, as its kubelet would.
func (w *workloadsFixture) finish(p *corev1.Pod) {
	p.Status.Phase = corev1.PodSucceeded
	_, err := w.cl.cs.CoreV1().Pods(w.ns).UpdateStatus(w.ctx(), p, metav1.UpdateOptions{})
	w.fatal(err)
}

// podEvents are the NodeFault Events on pod p (by its UID).
func (w *workloadsFixture) podEvents(p *corev1.Pod) []corev1.Event {
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": p.Name, "involvedObject.uid": string(p.UID),
		"reason": workloads.ReasonNodeFault}.AsSelector().String()
	l, err := w.cl.cs.CoreV1().Events(w.ns).List(w.ctx(), metav1.ListOptions{FieldSelector: sel})
	w.fatal(err)
	return l.Items
}

// TestAffectedPods: a fault that taints gpu-1 lists, in its NodeFault, exactly the
// pods holding gpu-1's GPUs (not its pod without GPUs, its finished pod, nor
// another node's) with their top owners (a CronJob's Job, a Deployment's
// ReplicaSet, a PyTorchJob named by its reference alone), and each such pod has one
// Warning Event naming the fault, its evidence and its query. A repeat changes
// neither; a fault reopened after its untaint lists and warns again.
func TestAffectedPods(t *testing.T) {
	cl := newCluster(t, "gpu-0", "gpu-1", "gpu-2")
	w := &workloadsFixture{cl: cl, ns: "ml"}
	_, err := cl.cs.CoreV1().Namespaces().Create(w.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{})
	w.fatal(err)
	job := w.cronJob("nightly", "nightly-29000000")
	rs := w.replicaSet("serve", "serve-5d8f7c")
	trainer := w.pod("train-0", "gpu-1", 4, controllerRef("batch/v1", "Job", job.Name, job.UID))
	pytorch := w.pod("bert-worker-0", "gpu-1", 2, controllerRef("kubeflow.org/v1", "PyTorchJob", "bert", "0f1e2d3c-0000-4000-8000-000000000001"))
	server := w.pod("serve-5d8f7c-x2x9p", "gpu-1", 1, controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID))
	cpuOnly := w.pod("exporter", "gpu-1", 0, nil)
	done := w.pod("train-old", "gpu-1", 8, controllerRef("batch/v1", "Job", job.Name, job.UID))
	w.finish(done)
	elsewhere := w.pod("other", "gpu-2", 8, nil)

	r := cl.start(options{decide: decide.Config{MaxPercent: 100, DisableStorm: true}, affectedPods: true, evidenceRefresh: 200 * time.Millisecond})
	cl.push("gpu-1", time.Now(), xid79)
	var nf *v1alpha1.NodeFault
	cl.waitFor("gpu-1's NodeFault with its evidence", 20*time.Second, func() bool {
		nf, err = cl.record("gpu-1", "nvidia-xid", "xid-gpu-lost")
		return err == nil && len(nf.Status.Evidence) > 0
	})
	a := nf.Status.Affected
	if a == nil || a.Omitted != 0 {
		t.Fatalf("affected = %+v", a)
	}
	want := []v1alpha1.AffectedPod{
		{Namespace: "ml", Name: pytorch.Name, UID: string(pytorch.UID), GPUs: 2, Owner: &v1alpha1.WorkloadRef{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "bert"}},
		{Namespace: "ml", Name: server.Name, UID: string(server.UID), GPUs: 1, Owner: &v1alpha1.WorkloadRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "serve"}},
		{Namespace: "ml", Name: trainer.Name, UID: string(trainer.UID), GPUs: 4, Owner: &v1alpha1.WorkloadRef{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly"}},
	}
	if len(a.Pods) != len(want) {
		t.Fatalf("affected pods = %+v, want %+v", a.Pods, want)
	}
	for i := range want {
		got := a.Pods[i]
		if got.Namespace != want[i].Namespace || got.Name != want[i].Name || got.UID != want[i].UID || got.GPUs != want[i].GPUs ||
			got.Owner == nil || *got.Owner != *want[i].Owner {
			t.Errorf("affected pod %d = %+v (owner %+v), want %+v (owner %+v)", i, got, got.Owner, want[i], want[i].Owner)
		}
	}

	// One Warning Event on each, naming the fault, its evidence and its query.
	for _, p := range []*corev1.Pod{trainer, pytorch, server} {
		cl.waitFor("NodeFault Event on "+p.Name, 10*time.Second, func() bool { return len(w.podEvents(p)) > 0 })
		evs := w.podEvents(p)
		e := evs[0]
		if len(evs) != 1 || e.Count != 1 || e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, nf.Name) ||
			!strings.Contains(e.Message, "nvidia-xid/xid-gpu-lost (critical)") || !strings.Contains(e.Message, "GPU has fallen off the bus") ||
			!strings.Contains(e.Message, nf.Status.Query) {
			t.Errorf("Events on %s: %+v", p.Name, evs)
		}
	}
	for _, p := range []*corev1.Pod{cpuOnly, done, elsewhere} {
		if evs := w.podEvents(p); len(evs) != 0 {
			t.Errorf("pod %s holds none of gpu-1's GPUs, has Events %+v", p.Name, evs)
		}
	}

	// A repeat, written to the record, changes neither the list nor the Events,
	// though a new GPU pod runs on the node by then.
	late := w.pod("late-0", "gpu-1", 1, nil)
	time.Sleep(500 * time.Millisecond) // past the evidence refresh
	cl.push("gpu-1", time.Now(), strings.Replace(xid79, "pid='<unknown>'", "pid=4242", 1))
	cl.waitFor("the repeat written", 20*time.Second, func() bool {
		nf2, err := cl.record("gpu-1", "nvidia-xid", "xid-gpu-lost")
		return err == nil && nf2.Status.Firings >= 2
	})
	nf2, err := cl.record("gpu-1", "nvidia-xid", "xid-gpu-lost")
	w.fatal(err)
	if b := nf2.Status.Affected; b == nil || !b.Time.Equal(&a.Time) || len(b.Pods) != len(a.Pods) {
		t.Errorf("a repeat changed the affected pods: %+v, was %+v", b, a)
	}
	time.Sleep(time.Second) // Events are sent asynchronously
	for _, p := range []*corev1.Pod{trainer, pytorch, server, late} {
		want := 1
		if p == late {
			want = 0
		}
		n := 0
		for _, e := range w.podEvents(p) {
			n += int(e.Count)
		}
		if n != want {
			t.Errorf("%d NodeFault Events on %s after a repeat, want %d", n, p.Name, want)
		}
	}

	// Untainted, then back: the reopened record lists the pods of now.
	if _, err := r.c.Untaint(w.ctx(), "gpu-1", "", "untainted by the test"); err != nil {
		t.Fatal(err)
	}
	cl.waitFor("resolved", 10*time.Second, func() bool { return cl.phase("gpu-1", "nvidia-xid", "xid-gpu-lost") == v1alpha1.PhaseResolved })
	cl.push("gpu-1", time.Now(), strings.Replace(xid79, "pid='<unknown>'", "pid=4343", 1))
	cl.waitFor("reopened with late-0 listed", 20*time.Second, func() bool {
		nf3, err := cl.record("gpu-1", "nvidia-xid", "xid-gpu-lost")
		return err == nil && nf3.Status.Phase == v1alpha1.PhaseTainted && nf3.Status.Affected != nil && len(nf3.Status.Affected.Pods) == 4
	})
	cl.waitFor("NodeFault Event on late-0", 10*time.Second, func() bool { return len(w.podEvents(late)) == 1 })
	if got := testutil.ToFloat64(r.m.PodEvents().WithLabelValues("posted")); got != 7 {
		t.Errorf("%v pod Events posted, want 7 (3, then 4 on reopening)", got)
	}
}

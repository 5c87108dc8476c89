package workloads

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestGPUs(t *testing.T) {
	q := resource.MustParse
	always := corev1.ContainerRestartPolicyAlways
	res := func(req, lim corev1.ResourceList) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Resources: res(corev1.ResourceList{"cpu": q("2")}, nil)}}}, 0},
		{"limits", corev1.PodSpec{Containers: []corev1.Container{{Resources: res(nil, corev1.ResourceList{"nvidia.com/gpu": q("4")})}}}, 4},
		{"requests and limits", corev1.PodSpec{Containers: []corev1.Container{
			{Resources: res(corev1.ResourceList{"nvidia.com/gpu": q("2")}, corev1.ResourceList{"nvidia.com/gpu": q("2")})},
			{Resources: res(corev1.ResourceList{"nvidia.com/gpu": q("1")}, nil)}}}, 3},
		{"mig slices", corev1.PodSpec{Containers: []corev1.Container{{Resources: res(nil, corev1.ResourceList{"nvidia.com/mig-1g.10gb": q("2")})}}}, 2},
		{"init container", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: res(nil, corev1.ResourceList{"nvidia.com/gpu": q("8")})}},
			Containers: []corev1.Container{{Resources: res(nil, corev1.ResourceList{"nvidia.com/gpu": q("1")})}}}, 8},
		{"sidecar", corev1.PodSpec{InitContainers: []corev1.Container{{RestartPolicy: &always, Resources: res(nil, corev1.ResourceList{"nvidia.com/gpu": q("1")})}},
			Containers: []corev1.Container{{Resources: res(nil, corev1.ResourceList{"nvidia.com/gpu": q("1")})}}}, 2},
		{"another vendor", corev1.PodSpec{Containers: []corev1.Container{{Resources: res(nil, corev1.ResourceList{"example.com/gpu": q("1")})}}}, 0},
	} {
		if got := GPUs(&corev1.Pod{Spec: c.spec}); got != c.want {
			t.Errorf("%s: %d GPUs, want %d", c.name, got, c.want)
		}
	}
}

// TestOwners: a Job's and a ReplicaSet's own controllers are read, once each; a
// custom kind is the top as its reference names it; an owner gone is the top.
func TestOwners(t *testing.T) {
	yes := true
	client := fake.NewClientset(
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "nightly-1", UID: "job", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "cron", Controller: &yes}}}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llm-workers-0", UID: "job2", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "llm", UID: "jobset", Controller: &yes}}}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "serve-5d8f7c", UID: "rs", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "serve", UID: "deploy", Controller: &yes}}}},
	)
	o := newOwners(client)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	refs := []ref{
		{apiVersion: "batch/v1", kind: "Job", name: "nightly-1", uid: "job"},
		{apiVersion: "batch/v1", kind: "Job", name: "llm-workers-0", uid: "job2"},
		{apiVersion: "apps/v1", kind: "ReplicaSet", name: "serve-5d8f7c", uid: "rs"},
		{apiVersion: "batch/v1", kind: "Job", name: "gone", uid: "gone"},
		{apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "bert", uid: "ptj"},
	}
	for _, r := range refs {
		o.learn("ml", r)
		o.learn("ml", r) // once is enough
	}
	for o.queue.Len() > 0 {
		l, _ := o.queue.Get()
		o.resolve(ctx, l)
		o.queue.Done(l)
	}
	want := []string{"CronJob/nightly", "JobSet/llm", "Deployment/serve", "Job/gone", "PyTorchJob/bert"}
	for i, r := range refs {
		if top := o.top(&r); top == nil || top.kind+"/"+top.name != want[i] {
			t.Errorf("top of %s/%s = %+v, want %s", r.kind, r.name, top, want[i])
		}
	}
	gets := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			gets++
		}
	}
	if gets != 4 {
		t.Errorf("%d lookups, want 4 (one per Job and ReplicaSet)", gets)
	}
	if o.top(nil) != nil {
		t.Error("a pod without owner has a top")
	}
}

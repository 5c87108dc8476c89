package demo

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/faultline-dev/faultline/test/testenv"
)

// trainingNS holds the demo's training jobs.
const trainingNS = "training"

// The nodes that run a training job, and the busy node of scenario 6.
const (
	pretrainNode = "gpu-3"
	busyNode     = "gpu-4"
)

// trainingJob is a Job whose one pod holds all eight GPUs of a node.
type trainingJob struct{ name, node string }

var trainingJobs = []trainingJob{{"llm-pretrain", pretrainNode}, {"llm-finetune", busyNode}}

// podName is the name of a training job's pod.
func (j trainingJob) podName() string { return j.name + "-worker-0" }

// training creates the training Jobs and their pods, bound to their nodes and
// Running, as the Job controller, the scheduler and the kubelet would have (none of
// them runs here), and starts the nodes' kubelets.
func (d *demo) training(ctx context.Context) {
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trainingNS}}, metav1.CreateOptions{}); err != nil {
		d.tb.Fatalf("namespace %s: %v", trainingNS, err)
	}
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	yes := true
	for _, tj := range trainingJobs {
		tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "trainer", Image: "nvcr.io/nvidia/pytorch:24.05-py3",
				Resources: corev1.ResourceRequirements{Limits: gpus}}}}}
		job, err := d.cs.BatchV1().Jobs(trainingNS).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: tj.name},
			Spec: batchv1.JobSpec{Template: tmpl}}, metav1.CreateOptions{})
		if err != nil {
			d.tb.Fatalf("job %s: %v", tj.name, err)
		}
		spec := job.Spec.Template.Spec
		spec.NodeName = tj.node
		pod, err := d.cs.CoreV1().Pods(trainingNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tj.podName(),
			Labels:          job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &yes}}},
			Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			d.tb.Fatalf("pod %s: %v", tj.podName(), err)
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := d.cs.CoreV1().Pods(trainingNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			d.tb.Fatalf("pod %s status: %v", tj.podName(), err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			d.kubelets(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	d.tb.Cleanup(func() { cancel(); <-done })
	for _, tj := range trainingJobs {
		d.say("        Job %s/%s: pod %s on %s, holding its 8 GPUs", trainingNS, tj.name, tj.podName(), tj.node)
	}
}

// kubelets does what the nodes' kubelets do for the training pods: a pod that has not
// finished holds its node's GPUs (the node's PodResources API lists it, which the
// probe agent asks before an invasive check); a pod being deleted (evicted by a
// drain) goes once its containers have stopped, at once here.
func (d *demo) kubelets(ctx context.Context) {
	pods, err := d.cs.CoreV1().Pods(trainingNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	holding := map[string][]*podresourcesv1.PodResources{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			zero := int64(0)
			_ = d.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var ids []string
		for i := 0; i < 8; i++ {
			ids = append(ids, fmt.Sprintf("GPU-%s-%d", p.Spec.NodeName, i))
		}
		holding[p.Spec.NodeName] = append(holding[p.Spec.NodeName],
			testenv.PodWithDevices(p.Namespace, p.Name, map[string][]string{"nvidia.com/gpu": ids}, nil))
	}
	for node, m := range d.machines {
		m.kubelet.SetPods(holding[node]...)
	}
}

// finish ends a training job's pod (its containers exited 0): its GPUs are free.
func (d *demo) finish(ctx context.Context, tj trainingJob) error {
	pod, err := d.cs.CoreV1().Pods(trainingNS).Get(ctx, tj.podName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: metav1.Now()}}
	_, err = d.cs.CoreV1().Pods(trainingNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

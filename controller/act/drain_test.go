package act

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/test/testenv"
)

// podSpec is what each pod of the drain tests is made of.
type podSpec struct {
	name, node string
	owner      *metav1.OwnerReference // controller; nil: none
	mirror     bool                   // the kubelet's mirror of a static pod
	emptyDir   bool
	phase      corev1.PodPhase // written to the status when set
	grace      *int64          // terminationGracePeriodSeconds
}

func createPod(t *testing.T, cs kubernetes.Interface, s podSpec) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{NodeName: s.node, TerminationGracePeriodSeconds: s.grace, Containers: []corev1.Container{{Name: "c", Image: "train"}}}}
	if s.owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*s.owner}
	}
	if s.mirror {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "static"}
	}
	if s.emptyDir {
		p.Spec.Volumes = []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
	}
	p, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", s.name, err)
	}
	if s.phase != "" {
		p.Status.Phase = s.phase
		if p, err = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s status: %v", s.name, err)
		}
	}
	return p
}

// podState says whether a pod is there, terminating or gone.
func podState(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	p, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "gone"
	case err != nil:
		t.Fatal(err)
	case p.DeletionTimestamp != nil:
		return "terminating"
	}
	return "there"
}

func controllerRef(kind, name string, uid types.UID) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}
}

// TestDrain runs the drain step on kubectl's drain helper against a real
// kube-apiserver (no kubelet: a pod evicted with its own grace period stays
// terminating).
func TestDrain(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	env.InstallCRD(t, v1alpha1.CRDYAML)
	cs := env.Clientset()
	ctx := context.Background()
	createNodes(t, cs, "drain-1", "drain-2", "drain-3", "drain-4")
	a, _ := startActor(t, env.RESTConfig(), Options{})
	zero := 0
	sel := map[string]string{"app": "agent"}
	ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceDefault).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agent"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs := controllerRef("ReplicaSet", "trainer", "trainer-uid")

	t.Run("EvictsWhatKubectlDrainWouldAndLogsIt", func(t *testing.T) {
		for _, s := range []podSpec{
			{name: "train-a", node: "drain-1", owner: rs, phase: corev1.PodRunning},
			{name: "train-shm", node: "drain-1", owner: rs, emptyDir: true, phase: corev1.PodRunning},
			{name: "agent-1", node: "drain-1", owner: controllerRef("DaemonSet", ds.Name, ds.UID), phase: corev1.PodRunning},
			{name: "static-1", node: "drain-1", mirror: true, phase: corev1.PodRunning},
			{name: "finished-1", node: "drain-1", owner: rs, phase: corev1.PodSucceeded},
			{name: "elsewhere", node: "drain-2", owner: rs, phase: corev1.PodRunning},
		} {
			createPod(t, cs, s)
		}
		var logs bytes.Buffer
		res, err := a.Drain(ctx, "drain-1", DrainOptions{Timeout: 20 * time.Second, GracePeriodSeconds: &zero, Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"default/train-a", "default/train-shm"}; !reflect.DeepEqual(res.Evicted, want) {
			t.Errorf("evicted %v, want %v", res.Evicted, want)
		}
		want := map[string]string{"train-a": "gone", "train-shm": "gone", "agent-1": "there", "static-1": "there", "finished-1": "there", "elsewhere": "there"}
		for name, w := range want {
			if got := podState(t, cs, name); got != w {
				t.Errorf("pod %s: %s, want %s", name, got, w)
			}
		}
		if !strings.Contains(res.Warnings, "DaemonSet") || !strings.Contains(res.Warnings, "default/agent-1") {
			t.Errorf("warnings %q: want the DaemonSet pod left", res.Warnings)
		}
		// The helper's progress goes to the logger, with the node.
		if l := logs.String(); !strings.Contains(l, "drain: evicting pod default/train-a") || !strings.Contains(l, "node=drain-1") {
			t.Errorf("log lacks the helper's progress:\n%s", l)
		}
	})

	t.Run("RefusesPodsWithoutAController", func(t *testing.T) {
		createPod(t, cs, podSpec{name: "bare", node: "drain-3", phase: corev1.PodRunning})
		createPod(t, cs, podSpec{name: "train-b", node: "drain-3", owner: rs, phase: corev1.PodRunning})
		res, err := a.Drain(ctx, "drain-3", DrainOptions{Timeout: 10 * time.Second, GracePeriodSeconds: &zero})
		if err == nil || !strings.Contains(err.Error(), "default/bare") || !strings.Contains(err.Error(), "no controller") ||
			errors.Is(err, ErrDrainBlocked) || errors.Is(err, ErrDrainTerminating) {
			t.Fatalf("drain with an unmanaged pod: %v", err)
		}
		if len(res.Evicted) != 0 || podState(t, cs, "train-b") != "there" || podState(t, cs, "bare") != "there" {
			t.Errorf("a refused drain evicted %v (train-b %s, bare %s)", res.Evicted, podState(t, cs, "train-b"), podState(t, cs, "bare"))
		}
	})

	t.Run("WaitsForEvictedPodsToTerminate", func(t *testing.T) {
		grace := int64(600)
		createPod(t, cs, podSpec{name: "slow", node: "drain-4", owner: rs, phase: corev1.PodRunning, grace: &grace})
		// Its own grace period and no kubelet to end it: still terminating at the deadline.
		res, err := a.Drain(ctx, "drain-4", DrainOptions{Timeout: 2 * time.Second})
		if !errors.Is(err, ErrDrainTerminating) || !strings.Contains(err.Error(), "default/slow") {
			t.Fatalf("drain of a terminating pod: %v", err)
		}
		if !reflect.DeepEqual(res.Evicted, []string{"default/slow"}) || podState(t, cs, "slow") != "terminating" {
			t.Errorf("evicted %v, pod %s", res.Evicted, podState(t, cs, "slow"))
		}
		// The next attempt evicts it again (now at once) and finds it gone.
		res, err = a.Drain(ctx, "drain-4", DrainOptions{Timeout: 10 * time.Second, GracePeriodSeconds: &zero})
		if err != nil || !reflect.DeepEqual(res.Evicted, []string{"default/slow"}) || podState(t, cs, "slow") != "gone" {
			t.Errorf("second attempt: evicted %v, %v, pod %s", res.Evicted, err, podState(t, cs, "slow"))
		}
	})
}

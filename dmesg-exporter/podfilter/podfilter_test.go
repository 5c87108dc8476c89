package podfilter_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/dmesg-exporter/podfilter"
	"github.com/faultline-dev/faultline/test/testenv"

	"github.com/faultline-dev/faultline/test/eventually"
)

func TestLabels(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	ctx := context.Background()
	mk := func(name, node string, l map[string]string) *corev1.Pod {
		p, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	train := mk("train-0", "n1", map[string]string{"workload": "training"})
	web := mk("web-0", "n1", map[string]string{"workload": "web"})
	other := mk("train-1", "n2", map[string]string{"workload": "training"})
	allow, err := podfilter.Labels(ctx, cs, "n1", "workload=training")
	if err != nil {
		t.Fatal(err)
	}
	if !allow("default", "train-0", string(train.UID)) {
		t.Error("training pod on this node refused")
	}
	if allow("default", "web-0", string(web.UID)) {
		t.Error("web pod allowed")
	}
	if allow("default", "train-1", string(other.UID)) {
		t.Error("pod of another node allowed")
	}
	if allow("default", "train-0", "0000-other-uid") {
		t.Error("a pod of the same name but another uid allowed")
	}
	// A pod created later is allowed once the watch sees it.
	late := mk("train-2", "n1", map[string]string{"workload": "training"})
	eventually.True(t, 10*time.Second, "the late pod allowed", func() bool { return allow("default", "train-2", string(late.UID)) })
	if _, err := podfilter.Labels(ctx, cs, "n1", "a=(b"); err == nil {
		t.Error("bad selector accepted")
	}
}

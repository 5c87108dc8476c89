package checkpoint_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/controller/checkpoint"
	"github.com/faultline-dev/faultline/test/testenv"
)

func TestCheckpointRealAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	ctx := context.Background()
	cs := env.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faultline"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := checkpoint.New(cs, "faultline", "faultline-checkpoint")
	if _, ok, err := s.Load(ctx); err != nil || ok {
		t.Fatalf("empty load: ok=%v err=%v", ok, err)
	}
	t1 := time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC)
	if err := s.Save(ctx, t1); err != nil {
		t.Fatal(err)
	}
	// A second store (another controller replica) sees it.
	got, ok, err := checkpoint.New(cs, "faultline", "faultline-checkpoint").Load(ctx)
	if err != nil || !ok || !got.Equal(t1) {
		t.Fatalf("load = %v %v %v", got, ok, err)
	}
	// Never backwards.
	if err := s.Save(ctx, t1.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Load(ctx); !got.Equal(t1) {
		t.Fatalf("moved backwards to %v", got)
	}
	t2 := t1.Add(time.Second)
	if err := s.Save(ctx, t2); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Load(ctx); !got.Equal(t2) {
		t.Fatalf("load = %v, want %v", got, t2)
	}
}

package checkpoint_test

import (
	"context"
	"strconv"
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
	if state, storms, err := s.LoadState(ctx); err != nil || state != nil || storms != nil {
		t.Fatalf("empty load: %s, %s, %v", state, storms, err)
	}
	t2 := time.Date(2025, 3, 1, 10, 0, 1, 123456789, time.UTC)
	// The full source position round-trips too.
	state := []byte(`{"start":"2025-03-01T10:00:01Z","queries":{"kernel":{"time":"2025-03-01T10:00:01Z"}}}`)
	storms := []byte(`{"rules":[{"rule":"nvidia-xid/xid-gpu-lost","active":true}]}`)
	if err := s.SaveState(ctx, state, t2, storms); err != nil {
		t.Fatal(err)
	}
	got2, gotStorms, err := checkpoint.New(cs, "faultline", "faultline-checkpoint").LoadState(ctx)
	if err != nil || string(got2) != string(state) || string(gotStorms) != string(storms) {
		t.Fatalf("LoadState = %s, %s, %v", got2, gotStorms, err)
	}
	// Without a storm state the saved one stays.
	if err := s.SaveState(ctx, []byte(`{}`), t2, nil); err != nil {
		t.Fatal(err)
	}
	if _, gotStorms, err := s.LoadState(ctx); err != nil || string(gotStorms) != string(storms) {
		t.Fatalf("storms after a save without them: %s, %v", gotStorms, err)
	}
	// The overall position, for people reading the ConfigMap, is t2 in Unix
	// nanoseconds.
	cm, err := cs.CoreV1().ConfigMaps("faultline").Get(ctx, "faultline-checkpoint", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data[checkpoint.Key]; got != strconv.FormatInt(t2.UnixNano(), 10) {
		t.Fatalf("%s = %q, want %d", checkpoint.Key, got, t2.UnixNano())
	}
}

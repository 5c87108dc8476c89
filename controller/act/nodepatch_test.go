package act

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Node write patches only what differs, with the resourceVersion it was planned on:
// a removed key is null, an unchanged taint list is left out, an emptied one is null.
func TestNodePatch(t *testing.T) {
	taint := corev1.Taint{Key: "faultline.io/faulty", Value: "xid-79", Effect: corev1.TaintEffectNoSchedule}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", ResourceVersion: "42",
		Labels:      map[string]string{"zone": "a", "faultline.io/health": "PASS"},
		Annotations: map[string]string{"faultline.io/faults": "old"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}}
	cases := []struct {
		name string
		edit func(*corev1.Node)
		want string
	}{
		{"label changed, key removed", func(w *corev1.Node) {
			w.Labels = map[string]string{"zone": "a", "faultline.io/health": "FAIL"}
			w.Annotations = nil
		}, `{"metadata":{"annotations":{"faultline.io/faults":null},"labels":{"faultline.io/health":"FAIL"},"resourceVersion":"42"}}`},
		{"taint added", func(w *corev1.Node) {
			w.Spec.Taints = append([]corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}, taint)
		}, `{"metadata":{"resourceVersion":"42"},"spec":{"taints":[{"key":"other","effect":"NoSchedule"},{"key":"faultline.io/faulty","value":"xid-79","effect":"NoSchedule"}]}}`},
		{"taints emptied", func(w *corev1.Node) { w.Spec.Taints = nil },
			`{"metadata":{"resourceVersion":"42"},"spec":{"taints":null}}`},
	}
	for _, c := range cases {
		w := n.DeepCopy()
		c.edit(w)
		got, err := nodePatch(n, w)
		if err != nil {
			t.Fatal(err)
		}
		var g, want any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, want) {
			t.Errorf("%s: patch %s, want %s", c.name, got, c.want)
		}
	}
}

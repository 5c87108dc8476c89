package act

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// An object's Events always take one lane, whether given as the object or as a
// reference to it (client-go correlates them only within a lane), and a fleet's
// nodes spread over the lanes.
func TestEventLanes(t *testing.T) {
	l := newLanes(corev1.EventSource{Component: "test"})
	defer l.shutdown()
	nf := &v1alpha1.NodeFault{ObjectMeta: metav1.ObjectMeta{Namespace: "faultline", Name: "node-1.xid.xid-79"}}
	ref := &corev1.ObjectReference{Kind: "NodeFault", Namespace: "faultline", Name: "node-1.xid.xid-79"}
	if l.lane(nf) != l.lane(ref) {
		t.Error("a NodeFault and a reference to it take different lanes")
	}
	used := map[any]bool{}
	for i := range 200 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%04d", i)}}
		if l.lane(n) != l.lane(n.DeepCopy()) {
			t.Fatalf("%s takes two lanes", n.Name)
		}
		used[l.lane(n)] = true
	}
	if len(used) < eventLanes/2 {
		t.Errorf("200 nodes took %d of %d lanes", len(used), eventLanes)
	}
}

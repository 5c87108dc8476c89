package workloads

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// ReasonNodeFault is the reason of the Warning Event on a pod that held GPUs of a
// node when a fault of that node was recorded.
const ReasonNodeFault = "NodeFault"

// Bounds of an Event's message (the API's limit on a note is 1024 bytes).
const (
	messageLimit  = 1024
	evidenceLimit = 256
)

// Recorded posts a Warning Event on each pod record nf lists: the Store calls it
// once per episode of the fault, so each pod has one Event per fault. The pods a
// record leaves out (past MaxPods) get none, and past the Events' rate (EventQPS,
// EventBurst) an Event is dropped and counted.
func (t *Tracker) Recorded(nf *v1alpha1.NodeFault) {
	a := nf.Status.Affected
	if a == nil || len(a.Pods) == 0 {
		return
	}
	msg := message(nf)
	for _, p := range a.Pods {
		if !t.limiter.TryAccept() {
			t.count("dropped")
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)}}
		if err := t.opts.Post(pod, corev1.EventTypeWarning, ReasonNodeFault, msg); err != nil {
			t.count("failed")
			utilruntime.HandleError(fmt.Errorf("event %s on pod %s/%s: %w", ReasonNodeFault, p.Namespace, p.Name, err))
			continue
		}
		t.count("posted")
	}
}

func (t *Tracker) count(result string) {
	if t.opts.Events != nil {
		t.opts.Events.WithLabelValues(result).Inc()
	}
}

// message says which fault hit the pod's node: the NodeFault, its rule and
// severity, the first evidence line and the LogQL query of the rule's lines on
// the node (or where to read it, when the message would cut it).
func message(nf *v1alpha1.NodeFault) string {
	evidence := ""
	if len(nf.Status.Evidence) > 0 {
		evidence = nodefault.Truncate(nf.Status.Evidence[0].Text, evidenceLimit)
	}
	head := fmt.Sprintf("node %s faulted: %s/%s (%s), recorded %s in NodeFault %s. Evidence: %q.",
		nf.Spec.Node, nf.Spec.Pack, nf.Spec.Rule, nf.Spec.Severity, nf.Status.Phase, nf.Name, evidence)
	if msg := head + " Logs (LogQL): " + nf.Status.Query; len(msg) <= messageLimit {
		return msg
	}
	return nodefault.Truncate(head+" Logs: the LogQL query in kubectl get nodefault "+nf.Name+" -o jsonpath='{.status.query}'", messageLimit)
}

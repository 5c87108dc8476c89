package act

import (
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
)

// eventLanes is how many Event broadcasters post at once. client-go's recorder posts
// its Events one at a time, and drops those its queues (1,000 Events each way) cannot
// hold, the second queue's without a log: with one broadcaster, half the nodes of a
// 1,000-node burst still had no Event two minutes after their taints. Sixteen post
// sixteen at a time, within the Events client's own rate limit.
const eventLanes = 16

// lanes is a record.EventRecorder over eventLanes broadcasters. An object's Events
// always take the same lane (by its name), so client-go's correlation (aggregating
// similar Events, the per-object spam filter) sees all of them.
type lanes struct {
	broadcasters []record.EventBroadcaster
	recorders    []record.EventRecorder
}

func newLanes(source corev1.EventSource) *lanes {
	l := &lanes{}
	for range eventLanes {
		b := record.NewBroadcaster()
		l.broadcasters = append(l.broadcasters, b)
		l.recorders = append(l.recorders, b.NewRecorder(scheme.Scheme, source))
	}
	return l
}

// start posts each lane's Events to sink.
func (l *lanes) start(sink record.EventSink) {
	for _, b := range l.broadcasters {
		b.StartRecordingToSink(sink)
	}
}

// shutdown stops every lane (Events still queued are dropped).
func (l *lanes) shutdown() {
	for _, b := range l.broadcasters {
		b.Shutdown()
	}
}

// lane is the recorder of object's lane.
func (l *lanes) lane(object runtime.Object) record.EventRecorder {
	var name string
	switch o := object.(type) {
	case *corev1.ObjectReference:
		name = o.Namespace + "/" + o.Name
	default:
		if m, err := meta.Accessor(object); err == nil {
			name = m.GetNamespace() + "/" + m.GetName()
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return l.recorders[h.Sum32()%uint32(len(l.recorders))]
}

func (l *lanes) Event(object runtime.Object, eventtype, reason, message string) {
	l.lane(object).Event(object, eventtype, reason, message)
}

func (l *lanes) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.lane(object).Eventf(object, eventtype, reason, messageFmt, args...)
}

func (l *lanes) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	l.lane(object).AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}

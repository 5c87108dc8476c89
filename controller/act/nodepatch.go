package act

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Node writes are JSON merge patches of what faultline changes (its labels and
// annotations, the taint list), each carrying the resourceVersion of the copy it
// was planned on: the API server refuses it with a conflict when the Node changed
// since, as it would an Update of the whole object. Unlike an Update, a patch does
// not need the whole object, so the Node cache keeps only what faultline reads
// (stripNode), and a write never sends back fields faultline does not own.

// cachedAnnotation reports whether the Node cache keeps annotation k: those of the
// prefixes faultline writes (its own, and Autopilot's with its compatibility on).
// The others (node-feature-discovery's feature lists, the CSI and cloud
// annotations) are often most of a Node's metadata, and faultline never reads them.
func cachedAnnotation(k string) bool {
	return strings.HasPrefix(k, "faultline.io/") || strings.HasPrefix(k, "autopilot.ibm.com/")
}

// nodePatch is the merge patch that turns n into want: the labels and annotations
// that differ (null removes one), the whole taint list when it differs (a merge
// patch replaces a list), and n's resourceVersion as the write's precondition.
func nodePatch(n, want *corev1.Node) ([]byte, error) {
	meta := map[string]any{"resourceVersion": n.ResourceVersion}
	if d := mapDiff(n.Labels, want.Labels); len(d) > 0 {
		meta["labels"] = d
	}
	if d := mapDiff(n.Annotations, want.Annotations); len(d) > 0 {
		meta["annotations"] = d
	}
	patch := map[string]any{"metadata": meta}
	if !apiequality.Semantic.DeepEqual(n.Spec.Taints, want.Spec.Taints) {
		var taints any // null: none left
		if len(want.Spec.Taints) > 0 {
			taints = want.Spec.Taints
		}
		patch["spec"] = map[string]any{"taints": taints}
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("node %s: patch: %w", n.Name, err)
	}
	return b, nil
}

// mapDiff is the merge patch of a string map from old to want: changed and new
// keys with their values, removed keys with null.
func mapDiff(old, want map[string]string) map[string]any {
	d := map[string]any{}
	for k, v := range want {
		if o, ok := old[k]; !ok || o != v {
			d[k] = v
		}
	}
	for k := range old {
		if _, ok := want[k]; !ok {
			d[k] = nil
		}
	}
	return d
}

// nodeWriter makes every Node write of the Actor, and notes each one (View.noteWrite)
// so that a read that follows does not plan on a cache still behind it.
type nodeWriter struct {
	client       kubernetes.Interface
	fieldManager string
	note         func(*corev1.Node)
}

// patch patches n (as read) into want.
func (w nodeWriter) patch(ctx context.Context, n, want *corev1.Node) (*corev1.Node, error) {
	patch, err := nodePatch(n, want)
	if err != nil {
		return nil, err
	}
	return w.write(ctx, n.Name, types.MergePatchType, patch)
}

// setCondition sets condition c in node's status. Conditions merge by type in a
// strategic merge patch: the kubelet's own are left alone.
func (w nodeWriter) setCondition(ctx context.Context, node string, c corev1.NodeCondition) (*corev1.Node, error) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		return nil, fmt.Errorf("node %s: condition patch: %w", node, err)
	}
	return w.write(ctx, node, types.StrategicMergePatchType, patch, "status")
}

func (w nodeWriter) write(ctx context.Context, node string, pt types.PatchType, patch []byte, sub ...string) (*corev1.Node, error) {
	u, err := w.client.CoreV1().Nodes().Patch(ctx, node, pt, patch, metav1.PatchOptions{FieldManager: w.fieldManager}, sub...)
	if err != nil {
		return nil, err
	}
	w.note(u)
	return u, nil
}

// keepsAnnotations reports whether the Node cache keeps every key of set.
func keepsAnnotations(set map[string]string) bool {
	for k := range maps.Keys(set) {
		if !cachedAnnotation(k) {
			return false
		}
	}
	return true
}

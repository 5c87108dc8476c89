package act

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// SetNodeLabel sets (value != "") or removes (value == "") one label of a node. It
// writes with Update, guarded by the resourceVersion like the taint writes (the
// controller's role has nodes update, not patch), and does nothing when the label
// already has the value. In dry-run mode it only reports whether it would change.
func (a *Actor) SetNodeLabel(ctx context.Context, node, key, value string) (changed bool, err error) {
	if err := a.ready(); err != nil {
		return false, err
	}
	attempt := 0
	err = retry.RetryOnConflict(a.opts.Backoff, func() error {
		attempt++
		n, err := a.readNode(ctx, node, attempt > 1)
		if err != nil {
			return err
		}
		if old, ok := n.Labels[key]; (ok && old == value) || (!ok && value == "") {
			changed = false
			return nil
		}
		changed = true
		if value == "" {
			delete(n.Labels, key)
		} else {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[key] = value
		}
		u, err := a.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: a.opts.Component})
		if err != nil {
			return err
		}
		a.noteWrite(u)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("label node %s %s=%q: %w", node, key, value, err)
	}
	return changed, nil
}

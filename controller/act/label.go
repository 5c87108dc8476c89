package act

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/retry"
)

// SetNodeMeta sets (value != "") or removes (value == "") labels and annotations of
// a node in one write, a patch guarded by the resourceVersion like the taint writes
// (nodepatch.go), and does nothing when they already have their values. An
// annotation the Node cache does not keep is compared on the Node read from the API.
// In dry-run mode it only reports whether it would change.
func (a *Actor) SetNodeMeta(ctx context.Context, node string, labels, annotations map[string]string) (changed bool, err error) {
	if err := a.ready(); err != nil {
		return false, err
	}
	attempt := 0
	err = retry.RetryOnConflict(a.opts.Backoff, func() error {
		attempt++
		n, err := a.readNode(ctx, node, attempt > 1 || !keepsAnnotations(annotations))
		if err != nil {
			return err
		}
		want := *n
		var lc, ac bool
		want.Labels, lc = withValues(n.Labels, labels)
		want.Annotations, ac = withValues(n.Annotations, annotations)
		changed = lc || ac
		if !changed {
			return nil
		}
		_, err = a.writer.patch(ctx, n, &want)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("label node %s %v, annotations %v: %w", node, labels, annotations, err)
	}
	return changed, nil
}

// withValues returns m with set applied ("" removes a key) and whether that
// changed it; m itself is left alone (it may be the informer's).
func withValues(m, set map[string]string) (map[string]string, bool) {
	changed := false
	for k, v := range set {
		if old, ok := m[k]; (ok && old != v) || (!ok && v != "") {
			changed = true
		}
	}
	if !changed {
		return m, false
	}
	out := make(map[string]string, len(m)+len(set))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range set {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out, true
}

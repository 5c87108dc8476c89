package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// ProbingTaint is on a node while an invasive probe runs there, so the scheduler
// places no new pod on GPUs that a stress test holds. The agent places it before the
// probe starts and removes it when the probe ends, whatever its outcome; an agent
// that starts removes one a crashed predecessor left (RemoveProbingTaint).
var ProbingTaint = corev1.Taint{Key: "faultline.io/probing", Effect: corev1.TaintEffectNoSchedule}

// taintTimeout bounds placing or removing the taint; removal runs on its own
// context so that a caller who hung up does not leave the node tainted.
const taintTimeout = 30 * time.Second

// setProbingTaint places (on) or removes the taint on node; it does nothing when the
// node already is as asked.
func setProbingTaint(ctx context.Context, client kubernetes.Interface, node string, on bool) error {
	ctx, cancel := context.WithTimeout(ctx, taintTimeout)
	defer cancel()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints := make([]corev1.Taint, 0, len(n.Spec.Taints)+1)
		has := false
		for _, t := range n.Spec.Taints {
			if t.MatchTaint(&ProbingTaint) {
				has = true
				if !on {
					continue
				}
			}
			taints = append(taints, t)
		}
		if has == on {
			return nil
		}
		if on {
			taints = append(taints, ProbingTaint)
		}
		n.Spec.Taints = taints
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	verb := "remove"
	if on {
		verb = "place"
	}
	if err != nil {
		return fmt.Errorf("%s taint %s on node %s: %w", verb, ProbingTaint.ToString(), node, err)
	}
	return nil
}

// RemoveProbingTaint removes a probing taint left on the agent's node by an agent
// that ended during an invasive probe (call it at start). It holds the invasive slot
// meanwhile, so it cannot remove the taint of a run that has just begun; if a run
// holds the slot, that run removes the taint when it ends.
func (a *Agent) RemoveProbingTaint(ctx context.Context) error {
	if a.cfg.Nodes == nil {
		return nil
	}
	claim, err := a.cfg.Runner.ClaimInvasive("removal of a stale probing taint")
	var busy *probe.BusyError
	if errors.As(err, &busy) {
		return nil // a run holds the node and will untaint it
	}
	if err != nil {
		return err
	}
	defer claim.Release()
	return setProbingTaint(ctx, a.cfg.Nodes, a.cfg.Node, false)
}

package act

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/drain"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// DefaultDrainTimeout bounds one drain attempt: a drain that a PodDisruptionBudget
// blocks longer is left waiting and tried again later, not waited on here.
const DefaultDrainTimeout = 30 * time.Second

// ErrDrainBlocked is matched (errors.Is) by the error Drain returns when an eviction
// was refused by a PodDisruptionBudget for the whole attempt: the step waits.
var ErrDrainBlocked = errors.New("eviction blocked by a PodDisruptionBudget")

// DrainResult is what one drain attempt did.
type DrainResult struct {
	// Evicted lists the pods evicted (namespace/name).
	Evicted []string
	// Warnings are the drain helper's warnings (DaemonSet pods left, ...).
	Warnings string
}

// Drain evicts the pods of node through the Eviction API, so PodDisruptionBudgets
// are respected, with client-go's drain helper (k8s.io/kubectl/pkg/drain). It does
// not cordon: the node already carries the rule's NoSchedule or NoExecute taint (the
// ladder climbs from it), and the admission policy keeps the controller off
// spec.unschedulable, which belongs to the operators. DaemonSet pods stay (they
// tolerate the taint anyway); pods without a controller are not deleted (a drain
// never loses a pod nobody would recreate): the attempt fails and says so.
// timeout bounds the attempt (DefaultDrainTimeout when 0); gracePeriod < 0 keeps
// each pod's own.
func (a *Actor) Drain(ctx context.Context, node string, timeout time.Duration, gracePeriod int) (DrainResult, error) {
	if err := a.ready(); err != nil {
		return DrainResult{}, err
	}
	if timeout <= 0 {
		timeout = DefaultDrainTimeout
	}
	// The deadline bounds every request too: client-go retries a refused eviction
	// (429) by itself, which would otherwise outlast the helper's own timeout.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res DrainResult
	var mu sync.Mutex
	errOut := &limitedBuffer{max: 16 << 10}
	h := &drain.Helper{
		Ctx:                 ctx,
		Client:              a.client,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		GracePeriodSeconds:  gracePeriod,
		Timeout:             timeout,
		Out:                 &limitedBuffer{max: 16 << 10},
		ErrOut:              errOut,
		OnPodDeletionOrEvictionFinished: func(p *corev1.Pod, _ bool, err error) {
			if err == nil {
				mu.Lock()
				res.Evicted = append(res.Evicted, p.Namespace+"/"+p.Name)
				mu.Unlock()
			}
		},
	}
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		return res, fmt.Errorf("drain %s: %w", node, errors.Join(errs...))
	}
	res.Warnings = list.Warnings()
	if err := h.DeleteOrEvictPods(list.Pods()); err != nil {
		// A refused eviction is retried until the deadline; a budget's refusal is a
		// wait, anything else a failure. The budgets themselves say which it was.
		if pdb := a.blockingPDB(context.WithoutCancel(ctx), list.Pods()); pdb != "" {
			return res, fmt.Errorf("drain %s: %w %s", node, ErrDrainBlocked, pdb)
		}
		if msg := errOut.String(); strings.Contains(msg, "disruption budget") {
			return res, fmt.Errorf("drain %s: %w: %s", node, ErrDrainBlocked, msg)
		}
		return res, fmt.Errorf("drain %s: %w", node, err)
	}
	return res, nil
}

// blockingPDB names the PodDisruptionBudget (namespace/name) that allows no
// disruption of one of pods still there, or "" when none does.
func (a *Actor) blockingPDB(ctx context.Context, pods []corev1.Pod) string {
	for _, p := range pods {
		cur, err := a.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || cur.DeletionTimestamp != nil {
			continue // gone or going
		}
		pdbs, err := a.client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, b := range pdbs.Items {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(cur.Labels)) {
				continue
			}
			if b.Status.DisruptionsAllowed < 1 || b.Status.ObservedGeneration < b.Generation {
				return fmt.Sprintf("%s/%s (pod %s/%s)", b.Namespace, b.Name, p.Namespace, p.Name)
			}
		}
	}
	return ""
}

// limitedBuffer keeps at most max bytes of what is written to it (the rest is
// dropped: the helper's progress lines are for logs, not for memory).
type limitedBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Escalating lists the cached records of faults that climb a ladder: those whose
// status has an escalation record and a taint recorded on the node.
func (a *Actor) Escalating() ([]*v1alpha1.NodeFault, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	var out []*v1alpha1.NodeFault
	for _, nf := range a.faults.List() {
		if nf.Status.Escalation != nil && nf.Status.Taint != nil && nf.Status.Phase != v1alpha1.PhaseResolved {
			out = append(out, nf)
		}
	}
	return out, nil
}

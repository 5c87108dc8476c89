package act

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

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
// are respected. It does not cordon: the node already carries the rule's
// NoSchedule or NoExecute taint (the ladder climbs from it), and the admission
// policy keeps the controller off spec.unschedulable, which belongs to the
// operators. It follows kubectl drain's rules: DaemonSet and mirror pods stay
// (they tolerate the taint or belong to the kubelet), finished pods are left
// alone, and a pod without a controller is never evicted (nobody would recreate
// it): the attempt fails and says so. It does not wait for the evicted pods to
// terminate: an accepted eviction is the kubelet's to finish.
//
// The drain helper of k8s.io/kubectl/pkg/drain is not used: it imports Go's
// plugin package (through cli-runtime and kustomize), and with cgo that makes the
// linker bind every symbol at start-up (-z now), which go-nvml's lazily bound
// symbols (absent from older drivers) do not survive: every cgo binary and test
// linking the controller and go-nvml would die at start.
//
// timeout bounds the attempt (DefaultDrainTimeout when 0): client-go retries a
// refused eviction (429) by itself, so a budget that allows no disruption ends
// the attempt at the deadline, as ErrDrainBlocked. gracePeriod < 0 keeps each
// pod's own.
func (a *Actor) Drain(ctx context.Context, node string, timeout time.Duration, gracePeriod int) (DrainResult, error) {
	if err := a.ready(); err != nil {
		return DrainResult{}, err
	}
	if timeout <= 0 {
		timeout = DefaultDrainTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res DrainResult
	pods, err := a.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(), Limit: maxDrainPods})
	if err != nil {
		return res, fmt.Errorf("drain %s: list pods: %w", node, err)
	}
	if pods.Continue != "" {
		return res, fmt.Errorf("drain %s: more than %d pods on the node", node, maxDrainPods)
	}
	var evict []corev1.Pod
	var unmanaged, left []string
	for _, p := range pods.Items {
		ctrl := metav1.GetControllerOf(&p)
		switch {
		case p.DeletionTimestamp != nil, p.Status.Phase == corev1.PodSucceeded, p.Status.Phase == corev1.PodFailed:
		case p.Annotations[corev1.MirrorPodAnnotationKey] != "":
			left = append(left, p.Namespace+"/"+p.Name+" (mirror)")
		case ctrl != nil && ctrl.Kind == "DaemonSet":
			left = append(left, p.Namespace+"/"+p.Name+" (DaemonSet)")
		case ctrl == nil:
			unmanaged = append(unmanaged, p.Namespace+"/"+p.Name)
		default:
			evict = append(evict, p)
		}
	}
	if len(left) > 0 {
		res.Warnings = "left on the node: " + strings.Join(left, ", ")
	}
	if len(unmanaged) > 0 {
		return res, fmt.Errorf("drain %s: pods without a controller would be lost, not evicted: %s", node, strings.Join(unmanaged, ", "))
	}
	var errs []error
	var refused []corev1.Pod
	for _, p := range evict {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if gracePeriod >= 0 {
			g := int64(gracePeriod)
			ev.DeleteOptions = &metav1.DeleteOptions{GracePeriodSeconds: &g}
		}
		err := a.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			res.Evicted = append(res.Evicted, p.Namespace+"/"+p.Name)
		case apierrors.IsTooManyRequests(err), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
			refused = append(refused, p)
		default:
			errs = append(errs, fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("drain %s: %w", node, errors.Join(errs...))
	}
	if len(refused) > 0 {
		// The budgets say whether it was theirs; the context is spent, so ask anew.
		if pdb := a.blockingPDB(context.WithoutCancel(ctx), refused); pdb != "" {
			return res, fmt.Errorf("drain %s: %w %s", node, ErrDrainBlocked, pdb)
		}
		return res, fmt.Errorf("drain %s: %d eviction(s) not accepted within %s", node, len(refused), timeout)
	}
	return res, nil
}

// maxDrainPods bounds the pods one drain lists (a node runs at most a few hundred).
const maxDrainPods = 1000

// blockingPDB names the PodDisruptionBudget (namespace/name) that allows no
// disruption of one of pods, or "" when none does.
func (a *Actor) blockingPDB(ctx context.Context, pods []corev1.Pod) string {
	for _, p := range pods {
		pdbs, err := a.client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, b := range pdbs.Items {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if b.Status.DisruptionsAllowed < 1 || b.Status.ObservedGeneration < b.Generation {
				return fmt.Sprintf("%s/%s (pod %s/%s)", b.Namespace, b.Name, p.Namespace, p.Name)
			}
		}
	}
	return ""
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

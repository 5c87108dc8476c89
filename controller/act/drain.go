package act

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/drain"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// DefaultDrainTimeout bounds one drain attempt: a drain that a PodDisruptionBudget
// blocks longer, or whose evicted pods take longer to terminate, is left waiting
// and tried again later, not waited on here.
const DefaultDrainTimeout = 30 * time.Second

// ErrDrainBlocked is matched (errors.Is) by the error Drain returns when an eviction
// was refused by a PodDisruptionBudget for the whole attempt: the step waits.
var ErrDrainBlocked = errors.New("eviction blocked by a PodDisruptionBudget")

// ErrDrainTerminating is matched (errors.Is) by the error Drain returns when every
// eviction was accepted but some evicted pods were still terminating (their grace
// period) at the end of the attempt: the step waits, and the next attempt waits on
// them again.
var ErrDrainTerminating = errors.New("evicted pods still terminating")

// DrainOptions configures one drain attempt.
type DrainOptions struct {
	// Timeout bounds the attempt (DefaultDrainTimeout when 0).
	Timeout time.Duration
	// GracePeriodSeconds, when set, overrides each pod's termination grace period
	// (0: at once); nil keeps each pod's own.
	GracePeriodSeconds *int
	// Log receives the drain helper's progress (Info) and retries (Warn); nil
	// discards them.
	Log *slog.Logger
}

// DrainResult is what one drain attempt did.
type DrainResult struct {
	// Evicted lists the pods whose eviction was accepted (namespace/name), gone or
	// still terminating, sorted.
	Evicted []string
	// Warnings are the drain helper's warnings (DaemonSet pods left, ...).
	Warnings string
}

// maxDrainPods bounds the pods one attempt evicts (the drain helper evicts each in
// a goroutine of its own; a node runs at most its kubelet's max-pods, 110 by
// default).
const maxDrainPods = 1000

// Drain evicts the pods of node with kubectl's drain helper (k8s.io/kubectl/pkg/drain)
// through the Eviction API (DisableEviction false; the helper falls back to deletes
// only on a server without that API, older than any client-go here supports, and
// the controller's role grants no pod delete), so PodDisruptionBudgets are
// respected: a refused eviction is retried until the attempt's deadline and then
// reported as ErrDrainBlocked, naming the budget. Then it waits, within the same
// deadline, for the evicted pods to be gone, as kubectl drain does; pods still
// terminating at the deadline give ErrDrainTerminating.
//
// It does not cordon (RunCordonOrUncordon is never called): the node already
// carries the rule's NoSchedule or NoExecute taint (the ladder climbs from it), and
// the admission policy keeps the controller off spec.unschedulable, which belongs
// to the operators. What stays follows kubectl drain's rules, through the helper's
// options:
//   - DaemonSet pods stay (IgnoreAllDaemonSets: they tolerate the taint and their
//     DaemonSet would recreate them), with a warning in DrainResult.Warnings; a pod
//     whose DaemonSet is gone fails the attempt (Force false);
//   - mirror pods stay (the helper always skips them: they belong to the kubelet);
//   - a pod without a controller is never evicted (Force false: nobody would
//     recreate it): the attempt fails, naming it, and nothing is evicted;
//   - pods with emptyDir volumes are evicted (DeleteEmptyDirData: scratch space and
//     /dev/shm of training pods, which their controller recreates elsewhere);
//   - finished pods (Succeeded, Failed) are left alone (an additional filter: they
//     hold no capacity, and a Job's finished pods are its record).
//
// The helper's output goes to opts.Log, never to stdout. Its retry of a refused
// eviction pauses 5 s without watching the deadline, so an attempt may overrun
// opts.Timeout by up to that pause.
func (a *Actor) Drain(ctx context.Context, node string, opts DrainOptions) (DrainResult, error) {
	if err := a.ready(); err != nil {
		return DrainResult{}, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultDrainTimeout
	}
	grace := -1
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("node", node)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var mu sync.Mutex
	gone := map[string]bool{}
	h := &drain.Helper{
		Ctx:                 ctx,
		Client:              a.client,
		GracePeriodSeconds:  grace,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		Timeout:             timeout,
		ChunkSize:           500,
		AdditionalFilters:   []drain.PodFilter{leaveFinished},
		Out:                 logWriter{log, slog.LevelInfo},
		ErrOut:              logWriter{log, slog.LevelWarn},
		OnPodDeletionOrEvictionFinished: func(p *corev1.Pod, _ bool, err error) {
			if err == nil {
				mu.Lock()
				gone[p.Namespace+"/"+p.Name] = true
				mu.Unlock()
			}
		},
	}
	var res DrainResult
	list, errs := h.GetPodsForDeletion(node)
	if list != nil {
		res.Warnings = list.Warnings()
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("drain %s: %w", node, errors.Join(errs...))
	}
	if res.Warnings != "" {
		log.Info("drain leaves pods on the node", "warnings", res.Warnings)
	}
	pods := list.Pods()
	if len(pods) > maxDrainPods {
		return res, fmt.Errorf("drain %s: %d pods to evict, more than %d", node, len(pods), maxDrainPods)
	}
	err := h.DeleteOrEvictPods(pods)
	mu.Lock()
	defer mu.Unlock()
	if err == nil {
		for _, p := range pods {
			res.Evicted = append(res.Evicted, p.Namespace+"/"+p.Name)
		}
		sort.Strings(res.Evicted)
		return res, nil
	}
	// Which pods the attempt moved: the helper's error is one string per pod, so
	// the pods themselves say it (the context is spent: ask anew, bounded).
	actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer acancel()
	var refused []corev1.Pod
	var terminating, unread []string
	for _, p := range pods {
		id := p.Namespace + "/" + p.Name
		if gone[id] {
			res.Evicted = append(res.Evicted, id)
			continue
		}
		cur, gerr := a.client.CoreV1().Pods(p.Namespace).Get(actx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr), gerr == nil && cur.UID != p.UID:
			res.Evicted = append(res.Evicted, id)
		case gerr != nil:
			unread = append(unread, id)
		case cur.DeletionTimestamp != nil:
			res.Evicted = append(res.Evicted, id)
			terminating = append(terminating, id)
		default:
			refused = append(refused, p)
		}
	}
	sort.Strings(res.Evicted)
	if len(refused) > 0 {
		if pdb := a.blockingPDB(actx, refused); pdb != "" {
			return res, fmt.Errorf("drain %s: %w %s", node, ErrDrainBlocked, pdb)
		}
		return res, fmt.Errorf("drain %s: %d eviction(s) not accepted within %s: %w", node, len(refused), timeout, err)
	}
	if len(unread) > 0 {
		return res, fmt.Errorf("drain %s: pods not read back (%s): %w", node, strings.Join(unread, ", "), err)
	}
	if len(terminating) > 0 {
		return res, fmt.Errorf("drain %s: %w after %s: %s", node, ErrDrainTerminating, timeout, strings.Join(terminating, ", "))
	}
	// Every pod was evicted and is gone; what the helper reported came after.
	log.Warn("drain finished with an error after every pod was gone", "err", err)
	return res, nil
}

// leaveFinished keeps the drain off finished pods: they hold no capacity.
func leaveFinished(p corev1.Pod) drain.PodDeleteStatus {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return drain.MakePodDeleteStatusSkip()
	}
	return drain.MakePodDeleteStatusOkay()
}

// maxLogLine bounds one logged line of the drain helper's output.
const maxLogLine = 1024

// logWriter turns the drain helper's output (one Fprintf per line) into log
// records at level.
type logWriter struct {
	log   *slog.Logger
	level slog.Level
}

func (w logWriter) Write(b []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if len(line) > maxLogLine {
			line = line[:maxLogLine]
		}
		if len(line) > 0 {
			w.log.Log(context.Background(), w.level, "drain: "+string(line))
		}
	}
	return len(b), nil
}

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
func (v *View) Escalating() ([]*v1alpha1.NodeFault, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	var out []*v1alpha1.NodeFault
	for _, nf := range v.faults.List() {
		if nf.Status.Escalation != nil && nf.Status.Taint != nil && nf.Status.Phase != v1alpha1.PhaseResolved {
			out = append(out, nf)
		}
	}
	return out, nil
}

package pvc

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// RoleYAML is the Role the probe needs in its namespace (role.yaml).
//
//go:embed role.yaml
var RoleYAML string

// Labels on every claim the probe creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelProbe     = "faultline.io/probe"
)

// Name is the check's name.
const Name = "pvc"

// SweepAge is how old a leftover claim must be before a run deletes it: longer than
// the longest run (the timeout's maximum, 20m, plus the cleanup), so a claim of a run
// still in progress elsewhere is never swept.
const SweepAge = 30 * time.Minute

// Spec returns the pvc probe's registration for the controller's registry: claims go
// to namespace unless a run names another (with namespace "", every run must name
// one). The probe is neither default-enabled nor invasive.
func Spec(client kubernetes.Interface, namespace string) probe.Spec {
	return probe.Spec{
		Name:   Name,
		Help:   "create a PVC of a storage class, wait until Bound, delete it",
		RunsOn: probe.OnController,
		TimeoutFor: func(p probe.Params) time.Duration {
			return p.Duration("timeout") + 45*time.Second // binding, then deletion and cleanup
		},
		Params: schema(namespace),
		New:    func(probe.Config) probe.Probe { return &Probe{Client: client, SweepAfter: SweepAge} },
	}
}

func schema(namespace string) probe.Schema {
	return probe.Schema{
		{Name: "storage_class", Type: probe.TypeString, Required: true, Check: dnsSubdomain,
			Help: "StorageClass of the claim"},
		{Name: "size", Type: probe.TypeString, Default: "1Gi", Check: quantity, Help: "requested storage (a resource quantity, at most 100Gi)"},
		{Name: "namespace", Type: probe.TypeString, Default: namespace, Required: namespace == "", Check: dnsLabel,
			Help: "namespace the claim is created in"},
		{Name: "timeout", Type: probe.TypeDuration, Default: "2m", Min: 1, Max: 1200, Help: "how long the claim may take to bind"},
		{Name: "access_mode", Type: probe.TypeEnum, Default: string(corev1.ReadWriteOnce),
			Enum: []string{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}, Help: "access mode of the claim"},
	}
}

func dnsSubdomain(v string) error {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func dnsLabel(v string) error {
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// maxSize bounds the claim a run may request: the probe asks whether the storage
// class provisions, which a small claim answers; a caller must not make it provision
// (and bill) terabytes.
var maxSize = resource.MustParse("100Gi")

func quantity(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return err
	}
	if q.Sign() <= 0 {
		return errors.New("must be positive")
	}
	if q.Cmp(maxSize) > 0 {
		return fmt.Errorf("at most %s", maxSize.String())
	}
	return nil
}

// Probe is the pvc probe.
type Probe struct {
	Client kubernetes.Interface
	// SweepAfter: leftover claims of the probe older than this are deleted at the
	// start of a run (a younger claim may belong to a run in progress); 0 means SweepAge.
	SweepAfter time.Duration
	// CleanupTimeout bounds the deletion of the probe's own claim (default 30s).
	CleanupTimeout time.Duration
}

// Run implements probe.Probe. Params are the resolved parameters of Spec's schema.
func (p *Probe) Run(ctx context.Context, params probe.Params) (probe.Result, error) {
	ns, class := params.String("namespace"), params.String("storage_class")
	if ns == "" || class == "" {
		return probe.Result{}, errors.New("namespace and storage_class are required")
	}
	size, err := resource.ParseQuantity(params.String("size"))
	if err != nil {
		return probe.Result{}, fmt.Errorf("size: %w", err)
	}
	timeout := params.Duration("timeout")
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	mode := corev1.PersistentVolumeAccessMode(params.String("access_mode"))
	if mode == "" {
		mode = corev1.ReadWriteOnce
	}
	age := p.SweepAfter
	if age <= 0 {
		age = SweepAge
	}
	if _, err := p.Sweep(ctx, ns, age); err != nil {
		return probe.Result{}, err
	}
	claims := p.Client.CoreV1().PersistentVolumeClaims(ns)
	// The create has a context of its own: a caller that goes away while the request
	// is in flight would otherwise leave a claim whose generated name it never learnt.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), p.cleanupTimeout())
	claim, err := claims.Create(cctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "faultline-probe-",
			Labels: map[string]string{LabelManagedBy: "faultline", LabelProbe: Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{})
	ccancel()
	if err != nil {
		return probe.Result{}, fmt.Errorf("create claim in %s: %w", ns, err)
	}
	start := time.Now()
	dev := probe.DeviceResult{ID: class}
	res := probe.Result{}
	deleted := false
	defer func() {
		// Runs on every path, a panic included. The caller may be gone (cancelled,
		// timed out): the claim must not stay, so the deletion has a context of its own.
		if !deleted {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cleanupTimeout())
			defer cancel()
			_, _, _ = p.remove(cctx, ns, claim.Name)
		}
	}()

	if err := ctx.Err(); err != nil {
		return probe.Result{}, err
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	phase, volume, err := p.waitBound(bctx, ns, claim)
	cancel()
	bind := time.Since(start)
	switch {
	case err == nil:
		dev.Status = probe.StatusPass
		dev.SetValue("bind_seconds", bind.Seconds())
		dev.Message = fmt.Sprintf("%s bound to %s in %s", claim.Name, volume, bind.Round(time.Millisecond))
	case ctx.Err() != nil:
		return probe.Result{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		dev.Status = probe.StatusFail
		dev.Message = fmt.Sprintf("%s not bound after %s (phase %s)%s", claim.Name, timeout, phase, p.why(ctx, ns, claim.Name))
	default:
		return probe.Result{}, err
	}
	rctx, rcancel := context.WithTimeout(ctx, p.cleanupTimeout())
	took, accepted, err := p.remove(rctx, ns, claim.Name)
	rcancel()
	deleted = accepted // a claim held by a finalizer goes once it is released; no second wait
	switch {
	case err == nil:
		dev.SetValue("delete_seconds", took.Seconds())
	case !accepted:
		// Refused (Forbidden, ...): the check did not do its job and the claim stays
		// unless the deferred attempt succeeds.
		dev.Status = probe.Worst(dev.Status, probe.StatusError)
		dev.Message += "; deletion: " + err.Error()
	default:
		dev.Status = probe.Worst(dev.Status, probe.StatusWarn)
		dev.Message += "; deletion: " + err.Error()
	}
	res.Devices = []probe.DeviceResult{dev}
	res.Status = dev.Status
	res.Message = fmt.Sprintf("class %s: %s", class, dev.Message)
	return res, nil
}

func (p *Probe) cleanupTimeout() time.Duration {
	if p.CleanupTimeout > 0 {
		return p.CleanupTimeout
	}
	return 30 * time.Second
}

// waitBound watches the claim until it is Bound or ctx ends; it returns the last
// phase seen and the volume name.
func (p *Probe) waitBound(ctx context.Context, ns string, claim *corev1.PersistentVolumeClaim) (corev1.PersistentVolumeClaimPhase, string, error) {
	phase := claim.Status.Phase
	rv := claim.ResourceVersion
	sel := fields.OneTermEqualSelector("metadata.name", claim.Name).String()
	for {
		if phase == corev1.ClaimBound {
			return phase, claim.Spec.VolumeName, nil
		}
		w, err := p.Client.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
		if err != nil {
			if ctx.Err() != nil {
				return phase, "", ctx.Err()
			}
			return phase, "", fmt.Errorf("watch claim %s: %w", claim.Name, err)
		}
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok {
				continue // a watch error or bookmark: re-watch below
			}
			if ev.Type == watch.Deleted {
				w.Stop()
				return phase, "", fmt.Errorf("claim %s was deleted while waiting", claim.Name)
			}
			claim, rv, phase = c, c.ResourceVersion, c.Status.Phase
			if phase == corev1.ClaimBound {
				w.Stop()
				return phase, claim.Spec.VolumeName, nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return phase, "", ctx.Err()
		}
		// The watch ended (server timeout, expired version): read the claim again
		// (a list by name: the role needs no get).
		l, err := p.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() != nil {
				return phase, "", ctx.Err()
			}
			return phase, "", fmt.Errorf("read claim %s: %w", claim.Name, err)
		}
		if len(l.Items) == 0 {
			return phase, "", fmt.Errorf("claim %s disappeared while waiting", claim.Name)
		}
		claim, rv, phase = &l.Items[0], l.Items[0].ResourceVersion, l.Items[0].Status.Phase
	}
}

// why reads the claim's Events for the reason it did not bind (the latest one).
func (p *Probe) why(ctx context.Context, ns, name string) string {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	l, err := p.Client.CoreV1().Events(ns).List(ectx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "PersistentVolumeClaim", "involvedObject.name": name}.AsSelector().String()})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	sort.SliceStable(l.Items, func(i, j int) bool { return eventTime(&l.Items[i]).Before(eventTime(&l.Items[j])) })
	e := l.Items[len(l.Items)-1]
	return fmt.Sprintf(": %s: %s", e.Reason, e.Message)
}

// eventTime is when an Event last happened, whichever API (core/v1 or events/v1)
// recorded it.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// remove deletes a claim and waits until it is gone; it returns how long that took
// and whether the deletion was accepted (a claim can stay, terminating, while a
// finalizer holds it).
func (p *Probe) remove(ctx context.Context, ns, name string) (time.Duration, bool, error) {
	start := time.Now()
	claims := p.Client.CoreV1().PersistentVolumeClaims(ns)
	err := claims.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return time.Since(start), true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("delete claim %s: %w", name, err)
	}
	err = waitGone(ctx, claims, name)
	return time.Since(start), true, err
}

// waitGone waits until the claim no longer exists.
func waitGone(ctx context.Context, claims typedcorev1.PersistentVolumeClaimInterface, name string) error {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	for {
		l, err := claims.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fmt.Errorf("claim %s: %w", name, err)
		}
		if len(l.Items) == 0 {
			return nil
		}
		w, err := claims.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.ResourceVersion})
		if err != nil {
			return fmt.Errorf("watch claim %s: %w", name, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("claim %s still terminating (finalizers %v): %w", name, l.Items[0].Finalizers, ctx.Err())
		}
	}
}

// Sweep deletes the probe's claims in ns older than age and returns their names.
func (p *Probe) Sweep(ctx context.Context, ns string, age time.Duration) ([]string, error) {
	claims := p.Client.CoreV1().PersistentVolumeClaims(ns)
	l, err := claims.List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=faultline," + LabelProbe + "=" + Name})
	if err != nil {
		return nil, fmt.Errorf("list leftover claims in %s: %w", ns, err)
	}
	var swept []string
	for _, c := range l.Items {
		if time.Since(c.CreationTimestamp.Time) < age || c.DeletionTimestamp != nil {
			continue
		}
		if err := claims.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return swept, fmt.Errorf("delete leftover claim %s: %w", c.Name, err)
		}
		swept = append(swept, c.Name)
	}
	return swept, nil
}

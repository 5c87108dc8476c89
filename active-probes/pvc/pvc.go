// Package pvc is the storage probe: it creates a PersistentVolumeClaim of a storage
// class, waits until it is Bound, deletes it and waits until it is gone — the path a
// training job's checkpoint volume takes. It runs in the controller (it needs the
// API, not a node) through the same probe framework as the node probes, so it has
// the same parameters, timeouts and metrics.
//
// Every claim it creates carries the labels below and is deleted on every path
// (bound, timeout, error, cancelled caller) with a context of its own; a claim left by
// a controller that died mid-probe is swept at the start of the next run.
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

// Spec returns the pvc probe's registration for the controller's registry: claims go
// to namespace unless a run names another.
func Spec(client kubernetes.Interface, namespace string) probe.Spec {
	params := probe.Schema{
		{Name: "storage_class", Type: probe.TypeString, Required: true, Check: dnsSubdomain,
			Help: "StorageClass of the claim"},
		{Name: "size", Type: probe.TypeString, Default: "1Gi", Check: quantity, Help: "requested storage (a resource quantity)"},
		{Name: "namespace", Type: probe.TypeString, Default: namespace, Check: dnsLabel, Help: "namespace the claim is created in"},
		{Name: "timeout", Type: probe.TypeDuration, Default: "2m", Min: 1, Max: 1800, Help: "how long the claim may take to bind"},
		{Name: "access_mode", Type: probe.TypeEnum, Default: string(corev1.ReadWriteOnce),
			Enum: []string{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}, Help: "access mode of the claim"},
	}
	return probe.Spec{
		Name: Name,
		Help: "create a PVC of a storage class, wait until Bound, delete it",
		TimeoutFor: func(p probe.Params) time.Duration {
			return p.Duration("timeout") + 45*time.Second // binding, then deletion and cleanup
		},
		Params: params,
		New:    func(probe.Config) probe.Probe { return &Probe{Client: client, SweepAfter: 30 * time.Minute} },
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

func quantity(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return err
	}
	if q.Sign() <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

// Probe is the pvc probe.
type Probe struct {
	Client kubernetes.Interface
	// SweepAfter: leftover claims of the probe older than this are deleted at the
	// start of a run (a claim younger than that may belong to a run in progress).
	SweepAfter time.Duration
	// CleanupTimeout bounds the deletion of the probe's own claim (default 30s).
	CleanupTimeout time.Duration
}

// Name implements probe.Probe.
func (*Probe) Name() string { return Name }

// Run implements probe.Probe.
func (p *Probe) Run(ctx context.Context, params probe.Params) (probe.Result, error) {
	ns, class := params.String("namespace"), params.String("storage_class")
	size := resource.MustParse(params.String("size"))
	if _, err := p.Sweep(ctx, ns, p.SweepAfter); err != nil {
		return probe.Result{}, err
	}
	claims := p.Client.CoreV1().PersistentVolumeClaims(ns)
	claim, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "faultline-probe-",
			Labels: map[string]string{LabelManagedBy: "faultline", LabelProbe: Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(params.String("access_mode"))},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return probe.Result{}, fmt.Errorf("create claim in %s: %w", ns, err)
	}
	start := time.Now()
	dev := probe.DeviceResult{ID: class}
	res := probe.Result{}
	deleted := false
	defer func() {
		if !deleted {
			// The caller may be gone (cancelled, timed out): the claim must not stay.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cleanupTimeout())
			defer cancel()
			_, _, _ = p.remove(cctx, ns, claim.Name)
		}
	}()

	bctx, cancel := context.WithTimeout(ctx, params.Duration("timeout"))
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
		dev.Message = fmt.Sprintf("%s not bound after %s (phase %s)%s", claim.Name, params.Duration("timeout"), phase, p.why(ctx, ns, claim.Name))
	default:
		return probe.Result{}, err
	}
	rctx, rcancel := context.WithTimeout(ctx, p.cleanupTimeout())
	took, accepted, err := p.remove(rctx, ns, claim.Name)
	rcancel()
	deleted = accepted // a claim held by a finalizer goes once it is released; no second wait
	if err != nil {
		dev.Status = probe.Worst(dev.Status, probe.StatusWarn)
		dev.Message += "; deletion: " + err.Error()
	} else {
		dev.SetValue("delete_seconds", took.Seconds())
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

// why reads the claim's Events for the reason it did not bind.
func (p *Probe) why(ctx context.Context, ns, name string) string {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	l, err := p.Client.CoreV1().Events(ns).List(ectx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "PersistentVolumeClaim", "involvedObject.name": name}.AsSelector().String()})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].LastTimestamp.Before(&l.Items[j].LastTimestamp) })
	e := l.Items[len(l.Items)-1]
	return fmt.Sprintf(": %s: %s", e.Reason, e.Message)
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

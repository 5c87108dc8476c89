// Package agentcerts is the approver and signer of the probe agents' per-node
// serving certificates: each agent asks the Kubernetes CSR API for a certificate of
// its node (signer faultline.io/probe-agent); the signer approves a request only
// when it comes from the agents' ServiceAccount with a token bound to a pod on the
// node the certificate would name, denies every other one with a condition saying
// why, and signs what it approved with the CA only the controller holds. So a key
// taken from one node serves only that node: the controller checks that an agent's
// certificate names the node it calls (controller/proberun).
//
// With an external signer (Config.SignerName, such as a cert-manager issuer's
// issuers.cert-manager.io/<namespace>.<issuer>) it approves and denies the same
// way and signs nothing: the external signer signs what was approved, and the CSR
// API is the contract between them.
package agentcerts

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/certreload"
)

// DefaultLifetime is how long an agent's certificate is valid; the agent renews it
// at 70 to 90% of that (client-go's certificate manager).
const DefaultLifetime = 24 * time.Hour

// Config says whose requests the signer approves and with what it signs.
type Config struct {
	Client kubernetes.Interface
	// SignerName is the spec.signerName of the requests decided (default
	// agentapi.SignerName). Another name is an external signer's: approve and deny
	// only, CA and Lifetime unused.
	SignerName string
	// AgentNamespace and AgentServiceAccount name the agents' ServiceAccount, the only
	// requester approved.
	AgentNamespace, AgentServiceAccount string
	// CA signs the approved requests of agentapi.SignerName.
	CA *certreload.Value[*CA]
	// Lifetime of a certificate (default DefaultLifetime); a request asking for less
	// (spec.expirationSeconds) gets less.
	Lifetime time.Duration
	Log      *slog.Logger
}

// Signer approves or denies, then signs, the CSRs of agentapi.SignerName; for an
// external signer it approves or denies only.
type Signer struct {
	cfg     Config
	lister  certlisters.CertificateSigningRequestLister
	synced  cache.InformerSynced
	factory informers.SharedInformerFactory
	queue   workqueue.TypedRateLimitingInterface[string]
	now     func() time.Time
}

// New watches the CSRs of the agents' signer; call Run.
func New(cfg Config) (*Signer, error) {
	if cfg.SignerName == "" {
		cfg.SignerName = agentapi.SignerName
	}
	if cfg.Client == nil || cfg.AgentNamespace == "" || cfg.AgentServiceAccount == "" {
		return nil, errors.New("agent certificate signer: client and the agents' ServiceAccount are required")
	}
	if signs := cfg.SignerName == agentapi.SignerName; signs != (cfg.CA != nil) {
		if signs {
			return nil, errors.New("agent certificate signer: a CA is required to sign for " + agentapi.SignerName)
		}
		return nil, errors.New("agent certificate signer: " + cfg.SignerName + " is an external signer's; the controller only approves for it and takes no CA")
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	// Only this signer's requests: the kubelets' and others' are not the
	// controller's to read.
	f := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", cfg.SignerName).String()
	}))
	inf := f.Certificates().V1().CertificateSigningRequests()
	s := &Signer{cfg: cfg, lister: inf.Lister(), synced: inf.Informer().HasSynced, factory: f, now: time.Now,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "agentcerts"})}
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Run approves and signs until ctx ends.
func (s *Signer) Run(ctx context.Context) error {
	defer s.queue.ShutDown()
	s.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.synced) {
		return fmt.Errorf("agent certificate signer: CSR cache not synced: %w", context.Cause(ctx))
	}
	go wait.UntilWithContext(ctx, s.work, time.Second)
	<-ctx.Done()
	return nil
}

func (s *Signer) work(ctx context.Context) {
	for {
		name, quit := s.queue.Get()
		if quit {
			return
		}
		err := s.sync(ctx, name)
		switch {
		case err == nil:
			s.queue.Forget(name)
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Another replica wrote first, or the request is gone: the watch brings
			// the new state.
			s.queue.Forget(name)
		default:
			utilruntime.HandleErrorWithContext(ctx, err, "agent certificate request", "csr", name)
			s.queue.AddRateLimited(name)
		}
		s.queue.Done(name)
	}
}

// signs says whether the controller signs what it approves (its own signer), or
// only approves for an external signer.
func (s *Signer) signs() bool { return s.cfg.SignerName == agentapi.SignerName }

// sync decides one request: approve or deny a new one, sign an approved one.
func (s *Signer) sync(ctx context.Context, name string) error {
	csr, err := s.lister.Get(name)
	if err != nil {
		return err
	}
	if csr.Spec.SignerName != s.cfg.SignerName || len(csr.Status.Certificate) > 0 ||
		hasCondition(csr, certificatesv1.CertificateDenied) || hasCondition(csr, certificatesv1.CertificateFailed) {
		return nil
	}
	approved := hasCondition(csr, certificatesv1.CertificateApproved)
	if approved && !s.signs() {
		// The external signer's to sign; marking it Failed would take its sign
		// permission, which the controller does not hold.
		return nil
	}
	req, bad := s.check(csr)
	if !approved {
		if csr, err = s.decide(ctx, csr.DeepCopy(), bad); err != nil || bad != nil || !s.signs() {
			return err
		}
	} else if bad != nil {
		// Approved by someone else (an administrator, another approver): the signer
		// still signs only an agent's request for its own node.
		return s.condition(ctx, csr.DeepCopy(), certificatesv1.CertificateFailed, bad.reason, "not signed: "+bad.message, true)
	}
	return s.issue(ctx, csr.DeepCopy(), req)
}

// decide approves the request, or denies it saying why.
func (s *Signer) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, bad *refusal) (*certificatesv1.CertificateSigningRequest, error) {
	typ, reason, msg := certificatesv1.CertificateDenied, "", ""
	if bad != nil {
		reason, msg = bad.reason, bad.message
	} else {
		// check found exactly one node.
		typ, reason, msg = certificatesv1.CertificateApproved, ReasonApproved, "the probe agent of node "+csr.Spec.Extra[NodeNameExtra][0]+" asks for its own node's certificate"
	}
	csr.Status.Conditions = append(csr.Status.Conditions, condition(typ, reason, msg, s.now()))
	out, err := s.cfg.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s CSR %s: %w", typ, csr.Name, err)
	}
	level := slog.LevelInfo
	if bad != nil {
		level = slog.LevelWarn
	}
	s.cfg.Log.Log(ctx, level, "agent certificate request "+string(typ), "csr", csr.Name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username, "reason", reason, "message", msg)
	return out, nil
}

// issue signs an approved request and writes the certificate into its status.
func (s *Signer) issue(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) error {
	lifetime := s.cfg.Lifetime
	if e := csr.Spec.ExpirationSeconds; e != nil && time.Duration(*e)*time.Second < lifetime {
		lifetime = time.Duration(*e) * time.Second
	}
	var usages x509.KeyUsage
	if slices.Contains(csr.Spec.Usages, certificatesv1.UsageDigitalSignature) {
		usages |= x509.KeyUsageDigitalSignature
	}
	if slices.Contains(csr.Spec.Usages, certificatesv1.UsageKeyEncipherment) {
		usages |= x509.KeyUsageKeyEncipherment
	}
	pem, err := s.cfg.CA.Get().sign(req, usages, lifetime, s.now())
	if err != nil {
		return s.condition(ctx, csr, certificatesv1.CertificateFailed, "SigningFailed", err.Error(), false)
	}
	csr.Status.Certificate = pem
	if _, err := s.cfg.Client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("write the certificate of CSR %s: %w", csr.Name, err)
	}
	s.cfg.Log.Info("agent certificate issued", "csr", csr.Name, "name", req.DNSNames[0], "lifetime", lifetime)
	return nil
}

// condition adds a condition through the status subresource (Failed) or the
// approval one.
func (s *Signer) condition(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType, reason, msg string, warn bool) error {
	csr.Status.Conditions = append(csr.Status.Conditions, condition(typ, reason, msg, s.now()))
	if _, err := s.cfg.Client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("mark CSR %s %s: %w", csr.Name, typ, err)
	}
	if warn {
		s.cfg.Log.Warn("agent certificate request not signed", "csr", csr.Name, "requester", csr.Spec.Username, "reason", reason, "message", msg)
	}
	return nil
}

func condition(typ certificatesv1.RequestConditionType, reason, msg string, now time.Time) certificatesv1.CertificateSigningRequestCondition {
	t := metav1.NewTime(now)
	return certificatesv1.CertificateSigningRequestCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
		LastUpdateTime: t, LastTransitionTime: t}
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

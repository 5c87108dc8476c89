// Package nodeauth is an OpenTelemetry Collector server authenticator for
// faultline's dmesg-exporters. An exporter sends its projected ServiceAccount
// token (audience e.g. faultline-collector) as "Authorization: Bearer <token>";
// the authenticator asks the apiserver with a TokenReview carrying the configured
// audiences, accepts only the configured ServiceAccounts, and takes the node from
// the review's node claim: a token bound to a pod carries the name of the node the
// pod runs on in user.extra["authentication.kubernetes.io/node-name"]
// (Kubernetes 1.32, feature ServiceAccountTokenPodNodeInfo, on by default), which
// the exporter cannot choose. Reviews are cached by the token's SHA-256 with an
// expiry, in a bounded LRU; an accepted token stays accepted a while longer
// when the apiserver cannot be reached (Config.StaleTTL).
//
// The authenticated node travels in the request's client.Info as the auth
// attribute AttrNode; the nodeattr processor writes it into the records.
package nodeauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

// Auth attributes of an authenticated request (client.Info.Auth.GetAttribute).
const (
	AttrNode           = "k8s.node.name"   // the node the sender's token was issued on
	AttrServiceAccount = "service.account" // system:serviceaccount:<namespace>:<name>
	AttrPod            = "k8s.pod.name"    // the sender's pod, when the token names one
)

// Claims of a pod-bound token in a TokenReview's user.extra.
const (
	extraNodeName = "authentication.kubernetes.io/node-name"
	extraPodName  = "authentication.kubernetes.io/pod-name"
)

// maxTokenBytes bounds the bearer token read from a request: a ServiceAccount
// JWT is about 1 KiB; anything far larger is not one and is not sent on.
const maxTokenBytes = 16 << 10

// ErrUnauthenticated is the error of every refused request. The receiver answers
// it with 401; the reason is logged by the collector, not told to the caller.
var ErrUnauthenticated = errors.New("unauthenticated: a faultline exporter's ServiceAccount token is required")

type identity struct {
	node, serviceAccount, pod string
}

// Why a request was refused: the reason attribute of
// faultline_nodeauth_refused_requests.
const (
	refusedNoToken         = "no_token"
	refusedUnauthenticated = "unauthenticated"
	refusedAudience        = "audience"
	refusedAccount         = "service_account"
	refusedNoNode          = "no_node"
	refusedReviewFailed    = "review_failed"
)

// review is a cached TokenReview outcome: an identity, or a refusal.
type review struct {
	id         identity
	refused    string    // non-empty: refused, one of the refused* reasons
	reason     string    // the refusal in words, for the log
	freshUntil time.Time // an accepted token is reviewed again after this
}

func refusal(kind, format string, args ...any) review {
	return review{refused: kind, reason: fmt.Sprintf(format, args...)}
}

type authenticator struct {
	cfg     *Config
	allowed map[string]bool
	log     *zap.Logger
	cache   *cache.LRUExpireCache
	clock   clock.PassiveClock
	reviews func(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	// refusedRequests counts every refused request by reason: a refusal is logged
	// only at debug level, so that a flood of bad requests cannot flood the log.
	refusedRequests metric.Int64Counter
	staleAccepted   metric.Int64Counter
}

var _ extensionauth.Server = (*authenticator)(nil)

func newAuthenticator(cfg *Config, set component.TelemetrySettings, clk clock.PassiveClock) (*authenticator, error) {
	meter := set.MeterProvider.Meter("github.com/faultline-dev/faultline/collector/nodeauth")
	refused, err := meter.Int64Counter("faultline_nodeauth_refused_requests",
		metric.WithDescription("Requests refused with 401, by reason (no_token, unauthenticated, audience, service_account, no_node, review_failed)"),
		metric.WithUnit("{requests}"))
	if err != nil {
		return nil, fmt.Errorf("faultlineauth: metric: %w", err)
	}
	stale, err := meter.Int64Counter("faultline_nodeauth_stale_accepted_requests",
		metric.WithDescription("Requests accepted on an earlier review because the apiserver could not review the token now"),
		metric.WithUnit("{requests}"))
	if err != nil {
		return nil, fmt.Errorf("faultlineauth: metric: %w", err)
	}
	return &authenticator{cfg: cfg, allowed: cfg.usernames(), log: set.Logger,
		cache: cache.NewLRUExpireCacheWithClock(cfg.CacheSize, clk), clock: clk,
		refusedRequests: refused, staleAccepted: stale}, nil
}

func (a *authenticator) refuse(ctx context.Context, kind, reason string) error {
	a.refusedRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", kind)))
	a.log.Debug("exporter refused", zap.String("reason", reason))
	return ErrUnauthenticated
}

// Start makes the Kubernetes client (in-cluster unless a kubeconfig is set).
func (a *authenticator) Start(context.Context, component.Host) error {
	var (
		rc  *rest.Config
		err error
	)
	if a.cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", a.cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("faultlineauth: kubernetes client config: %w", err)
	}
	rc.UserAgent = "faultline-collector-auth"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("faultlineauth: kubernetes client: %w", err)
	}
	a.reviews = func(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
		return cs.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
	}
	return nil
}

// Shutdown has nothing to release.
func (a *authenticator) Shutdown(context.Context) error { return nil }

// Authenticate implements extensionauth.Server.
func (a *authenticator) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	tok, err := bearerToken(sources)
	if err != nil {
		return ctx, a.refuse(ctx, refusedNoToken, err.Error())
	}
	key := sha256.Sum256([]byte(tok))
	var r review
	v, cached := a.cache.Get(key)
	if cached {
		r = v.(review)
	}
	if !cached || (r.reason == "" && a.clock.Now().After(r.freshUntil)) {
		nr, err := a.review(ctx, tok)
		switch {
		case err == nil:
			r = nr
			a.remember(key, r)
		case cached:
			// Accepted before, and the apiserver does not answer now: still accepted,
			// until the entry's stale time runs out.
			a.staleAccepted.Add(ctx, 1)
			a.log.Warn("TokenReview failed; accepting a token reviewed before", zap.Error(err))
		default:
			a.log.Warn("TokenReview failed", zap.Error(err))
			_ = a.refuse(ctx, refusedReviewFailed, err.Error())
			return ctx, fmt.Errorf("%w (the token could not be reviewed now)", ErrUnauthenticated)
		}
	}
	if r.refused != "" {
		return ctx, a.refuse(ctx, r.refused, r.reason)
	}
	info := client.FromContext(ctx)
	info.Auth = authData{r.id}
	return client.NewContext(ctx, info), nil
}

// remember caches a review: a refusal for NegativeCacheTTL, an acceptance fresh
// for CacheTTL and usable StaleTTL longer when the apiserver cannot answer.
func (a *authenticator) remember(key [sha256.Size]byte, r review) {
	if r.refused != "" {
		if a.cfg.NegativeCacheTTL > 0 {
			a.cache.Add(key, r, a.cfg.NegativeCacheTTL)
		}
		return
	}
	r.freshUntil = a.clock.Now().Add(a.cfg.CacheTTL)
	if ttl := a.cfg.CacheTTL + a.cfg.StaleTTL; ttl > 0 {
		a.cache.Add(key, r, ttl)
	}
}

// review asks the apiserver about tok. A refusal is a review with a reason; an
// error means no answer.
func (a *authenticator) review(ctx context.Context, tok string) (review, error) {
	if a.reviews == nil {
		return review{}, errors.New("not started")
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ReviewTimeout)
	defer cancel()
	res, err := a.reviews(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: a.cfg.Audiences},
	})
	if err != nil {
		return review{}, fmt.Errorf("TokenReview: %w", err)
	}
	st := res.Status
	switch {
	case !st.Authenticated:
		return refusal(refusedUnauthenticated, "token not authenticated: %s", st.Error), nil
	case !intersects(st.Audiences, a.cfg.Audiences):
		// The apiserver answers with the audiences the token is valid for; none of ours.
		return refusal(refusedAudience, "token audiences %v, want one of %v", st.Audiences, a.cfg.Audiences), nil
	case !a.allowed[st.User.Username]:
		return refusal(refusedAccount, "%s is not an exporter ServiceAccount", st.User.Username), nil
	}
	nodes := st.User.Extra[extraNodeName]
	if len(nodes) != 1 || nodes[0] == "" {
		return refusal(refusedNoNode, "%s: the token names no node (a token bound to the exporter's pod is required)", st.User.Username), nil
	}
	id := identity{node: nodes[0], serviceAccount: st.User.Username}
	if pods := st.User.Extra[extraPodName]; len(pods) == 1 {
		id.pod = pods[0]
	}
	return review{id: id}, nil
}

// bearerToken reads "Authorization: Bearer <token>". HTTP receivers pass the
// canonical header name, gRPC receivers the lower-case one.
func bearerToken(sources map[string][]string) (string, error) {
	var vals []string
	for k, v := range sources {
		if strings.EqualFold(k, "authorization") {
			vals = append(vals, v...)
		}
	}
	if len(vals) != 1 {
		return "", fmt.Errorf("%d Authorization headers, want 1", len(vals))
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errors.New("authorization is not a bearer token")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || len(tok) > maxTokenBytes {
		return "", fmt.Errorf("bearer token of %d bytes", len(tok))
	}
	return tok, nil
}

func intersects(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// authData is the client.AuthData of an authenticated exporter.
type authData struct{ id identity }

func (d authData) GetAttribute(name string) any {
	switch name {
	case AttrNode:
		return d.id.node
	case AttrServiceAccount:
		return d.id.serviceAccount
	case AttrPod:
		return d.id.pod
	}
	return nil
}

func (d authData) GetAttributeNames() []string {
	return []string{AttrNode, AttrServiceAccount, AttrPod}
}

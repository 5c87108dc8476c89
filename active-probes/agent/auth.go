package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Errors an Authorizer returns; the agent answers 401 and 403 for them.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Authorizer decides whether the bearer of a token may perform verb ("get" to list
// checks, "create" to run them) on this node's probes. It returns the caller's user
// name for the log.
type Authorizer interface {
	Authorize(ctx context.Context, token, verb string) (user string, err error)
}

// The resource a caller needs access to: verbs get/create on probes.faultline.io,
// with the node's name as the resource name (so a role can be limited to some nodes).
const (
	ResourceGroup = "faultline.io"
	Resource      = "probes"
)

// KubeAuthorizer checks tokens with the apiserver: a TokenReview authenticates the
// token, a SubjectAccessReview authorizes the identity it belongs to. Decisions are
// cached for TTL (allowed) or NegativeTTL (refused), keyed by a hash of the token, so a
// burst of requests costs two API calls, not two per request.
type KubeAuthorizer struct {
	Client kubernetes.Interface
	Node   string
	// Audiences the token must be for (empty: the apiserver's).
	Audiences   []string
	TTL         time.Duration // default 1m
	NegativeTTL time.Duration // default 5s

	mu    sync.Mutex
	cache map[[32]byte]authDecision
}

type authDecision struct {
	user    string
	err     error
	expires time.Time
}

// Authorize implements Authorizer.
func (a *KubeAuthorizer) Authorize(ctx context.Context, token, verb string) (string, error) {
	if token == "" {
		return "", fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	key := sha256.Sum256([]byte(verb + "\x00" + token))
	now := time.Now()
	a.mu.Lock()
	if d, ok := a.cache[key]; ok && now.Before(d.expires) {
		a.mu.Unlock()
		return d.user, d.err
	}
	a.mu.Unlock()

	user, err := a.review(ctx, token, verb)
	if err != nil && !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, ErrForbidden) {
		return "", err // the apiserver could not answer: decide nothing, cache nothing
	}
	ttl := a.TTL
	if ttl <= 0 {
		ttl = time.Minute
	}
	if err != nil {
		ttl = a.NegativeTTL
		if ttl <= 0 {
			ttl = 5 * time.Second
		}
	}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) > 10000 {
		a.cache = map[[32]byte]authDecision{}
	}
	a.cache[key] = authDecision{user: user, err: err, expires: now.Add(ttl)}
	a.mu.Unlock()
	return user, err
}

func (a *KubeAuthorizer) review(ctx context.Context, token, verb string) (string, error) {
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: a.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		msg := tr.Status.Error
		if msg == "" {
			msg = "token not accepted"
		}
		return "", fmt.Errorf("%w: %s", ErrUnauthenticated, msg)
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authzv1.ResourceAttributes{
				Group: ResourceGroup, Resource: Resource, Verb: verb, Name: a.Node,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return u.Username, fmt.Errorf("subject access review: %w", err)
	}
	if !sar.Status.Allowed {
		why := sar.Status.Reason
		if why == "" {
			why = "no role grants it"
		}
		return u.Username, fmt.Errorf("%w: %s may not %s %s.%s on node %s: %s", ErrForbidden, u.Username, verb, Resource, ResourceGroup, a.Node, why)
	}
	return u.Username, nil
}

// Package kubeauth authenticates and authorizes HTTP callers with Kubernetes
// identities, as the apiserver's own clients are: a TokenReview says who the bearer
// token belongs to, a SubjectAccessReview whether that identity may perform an action
// on a faultline.io resource. The probe agent uses it, so cluster admins grant access
// with ordinary RBAC.
package kubeauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Errors an Authorizer returns; listeners answer 401 and 403 for them.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
	// ErrRateLimited: the token is not in the cache and the reviews per second are
	// spent; listeners answer 429 with Retry-After (RetryAfter).
	ErrRateLimited = errors.New("too many token reviews")
)

// RateLimitError is an ErrRateLimited with the time after which a review is free.
type RateLimitError struct{ RetryAfter time.Duration }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%v: retry in %s", ErrRateLimited, e.RetryAfter.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// RetryAfter is how long a caller refused with ErrRateLimited should wait (0 for
// other errors).
func RetryAfter(err error) time.Duration {
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return rl.RetryAfter
	}
	return 0
}

// Group is the API group of every resource faultline checks access to.
const Group = "faultline.io"

// Action is what a caller wants to do: a verb on a faultline.io resource (and
// subresource), optionally on one named object (a node).
type Action struct {
	Verb        string
	Resource    string
	Subresource string
	Name        string
}

func (a Action) String() string {
	s := a.Verb + " " + a.Resource
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	s += "." + Group
	if a.Name != "" {
		s += " " + a.Name
	}
	return s
}

// Authorizer decides whether the bearer of a token may perform an action. It returns
// the caller's user name for the log.
type Authorizer interface {
	Authorize(ctx context.Context, token string, act Action) (user string, err error)
}

// maxCache bounds the decision cache, so a flood of distinct tokens cannot grow
// memory; when full, expired and refused decisions go first, and only if that frees
// nothing is it emptied (callers then pay two API calls once more).
const maxCache = 10000

// Defaults of the reviews a Reviewer makes per second for tokens it has not cached.
const (
	DefaultReviewsPerSecond = 20
	DefaultReviewBurst      = 40
)

// Reviewer checks tokens with the apiserver. Decisions are cached for TTL (allowed)
// or NegativeTTL (refused), keyed by a hash of the token and the action, so a burst of
// requests costs two API calls, not two per request. Reviews of uncached tokens are
// rate limited (ReviewsPerSecond), so a flood of random tokens costs the apiserver
// at most that many reviews and its senders get ErrRateLimited.
type Reviewer struct {
	Client kubernetes.Interface
	// Audiences the token must be for (empty: the apiserver's).
	Audiences   []string
	TTL         time.Duration // default 1m
	NegativeTTL time.Duration // default 5s
	// ReviewsPerSecond and ReviewBurst bound the reviews of uncached tokens (0:
	// DefaultReviewsPerSecond, DefaultReviewBurst).
	ReviewsPerSecond float64
	ReviewBurst      int
	// RateLimited counts the requests refused because the reviews were spent (nil:
	// not counted).
	RateLimited prometheus.Counter

	mu      sync.Mutex
	cache   map[[32]byte]decision
	limiter *rate.Limiter
}

type decision struct {
	user    string
	err     error
	expires time.Time
}

// Authorize implements Authorizer.
func (a *Reviewer) Authorize(ctx context.Context, token string, act Action) (string, error) {
	if token == "" {
		return "", fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	key := sha256.Sum256([]byte(act.Verb + "\x00" + act.Resource + "\x00" + act.Subresource + "\x00" + act.Name + "\x00" + token))
	now := time.Now()
	a.mu.Lock()
	if d, ok := a.cache[key]; ok && now.Before(d.expires) {
		a.mu.Unlock()
		return d.user, d.err
	}
	if a.limiter == nil {
		perSecond, burst := a.ReviewsPerSecond, a.ReviewBurst
		if perSecond <= 0 {
			perSecond = DefaultReviewsPerSecond
		}
		if burst <= 0 {
			burst = DefaultReviewBurst
		}
		a.limiter = rate.NewLimiter(rate.Limit(perSecond), burst)
	}
	r := a.limiter.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		a.mu.Unlock()
		if a.RateLimited != nil {
			a.RateLimited.Inc()
		}
		return "", &RateLimitError{RetryAfter: wait}
	}
	a.mu.Unlock()

	user, err := a.review(ctx, token, act)
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
	if len(a.cache) >= maxCache {
		for k, d := range a.cache {
			if d.err != nil || !now.Before(d.expires) {
				delete(a.cache, k)
			}
		}
	}
	if a.cache == nil || len(a.cache) >= maxCache {
		a.cache = map[[32]byte]decision{}
	}
	a.cache[key] = decision{user: user, err: err, expires: now.Add(ttl)}
	a.mu.Unlock()
	return user, err
}

func (a *Reviewer) review(ctx context.Context, token string, act Action) (string, error) {
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
				Group: Group, Resource: act.Resource, Subresource: act.Subresource, Verb: act.Verb, Name: act.Name,
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
		return u.Username, fmt.Errorf("%w: %s may not %s: %s", ErrForbidden, u.Username, act, why)
	}
	return u.Username, nil
}

// BearerToken returns the request's bearer token, or "" when it has none.
func BearerToken(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(tok)
}

package kubeauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/test/testenv"
)

// countReviews counts the TokenReviews a client sends to the apiserver.
type countReviews struct {
	next http.RoundTripper
	n    *atomic.Int32
}

func (c countReviews) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tokenreviews") {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// A flood of random tokens costs the real apiserver at most the reviews the limit
// allows (the burst, plus the rate over the flood's time); the rest are refused with
// ErrRateLimited (429, with a time to retry) without a review, and a caller whose
// decision is cached is served throughout.
func TestReviewsRateLimited(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	ctx := context.Background()
	token := env.ServiceAccountToken(t, "faultline", "viewer")
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "faultline", Name: "viewer"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var reviews atomic.Int32
	cfg := env.RESTConfig()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countReviews{next: rt, n: &reviews} }
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const perSecond, burst = 2, 5
	limited := prometheus.NewCounter(prometheus.CounterOpts{Name: "limited_total", Help: "refused reviews"})
	r := &kubeauth.Reviewer{Client: client, ReviewsPerSecond: perSecond, ReviewBurst: burst, RateLimited: limited}
	act := kubeauth.Action{Verb: "get", Resource: "probes", Name: "gpu-1"}
	if user, err := r.Authorize(ctx, token, act); err != nil || user != "system:serviceaccount:faultline:viewer" {
		t.Fatalf("the viewer: %q %v", user, err)
	}

	start := time.Now()
	var (
		mu      sync.Mutex
		outcome = map[string]int{}
		wg      sync.WaitGroup
	)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Authorize(ctx, fmt.Sprintf("random-token-%d", i), act)
			key := "other: " + fmt.Sprint(err)
			switch {
			case errors.Is(err, kubeauth.ErrUnauthenticated):
				key = "401"
			case errors.Is(err, kubeauth.ErrRateLimited) && kubeauth.RetryAfter(err) > 0:
				key = "429"
			}
			mu.Lock()
			outcome[key]++
			mu.Unlock()
		}()
		if _, err := r.Authorize(ctx, token, act); err != nil {
			t.Errorf("the cached viewer during the flood: %v", err)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed := burst - 1 + int(elapsed.Seconds()*perSecond) + 1 // the viewer's review used one of the burst
	t.Logf("200 random tokens in %s: %d TokenReviews reached the apiserver, outcomes %v", elapsed.Round(time.Millisecond), reviews.Load()-1, outcome)
	if n := int(reviews.Load()) - 1; n > allowed || outcome["401"] != n || outcome["429"] != 200-n {
		t.Errorf("200 random tokens in %s: %d reviews reached the apiserver (at most %d allowed), outcomes %v",
			elapsed.Round(time.Millisecond), n, allowed, outcome)
	}
	if n := testutil.ToFloat64(limited); int(n) != outcome["429"] {
		t.Errorf("RateLimited counted %v refusals, want %d", n, outcome["429"])
	}
	if outcome["429"] < 150 {
		t.Errorf("only %d of 200 random tokens were refused by the limit: %v", outcome["429"], outcome)
	}
}

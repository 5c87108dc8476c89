package nodeauth

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	authenticationv1 "k8s.io/api/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

const exporter = "system:serviceaccount:faultline:faultline-dmesg-exporter"

// apiserver answers TokenReviews from a table of tokens, counting the reviews;
// down makes it fail like an unreachable apiserver. The end-to-end behaviour with
// the real apiserver is in test/collectorauth; this covers the decisions and the
// cache, which need a clock.
type apiserver struct {
	tokens  map[string]authenticationv1.TokenReviewStatus
	reviews int
	down    bool
}

func (s *apiserver) review(_ context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	s.reviews++
	if s.down {
		return nil, errors.New("connection refused")
	}
	return &authenticationv1.TokenReview{Status: s.tokens[tr.Spec.Token]}, nil
}

type fixture struct {
	*authenticator
	srv     *apiserver
	clk     *clocktesting.FakePassiveClock
	metrics *sdkmetric.ManualReader
}

// refused returns faultline_nodeauth_refused_requests by reason.
func (f fixture) refused(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "faultline_nodeauth_refused_requests" {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					r, _ := dp.Attributes.Value("reason")
					out[r.AsString()] += dp.Value
				}
			}
		}
	}
	return out
}

func newTest(t *testing.T) fixture {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Audiences = []string{"faultline-collector"}
	cfg.ServiceAccounts = []string{"faultline/faultline-dmesg-exporter"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	user := func(name string, extra map[string]authenticationv1.ExtraValue) authenticationv1.UserInfo {
		return authenticationv1.UserInfo{Username: name, Extra: extra}
	}
	onNode := map[string]authenticationv1.ExtraValue{extraNodeName: {"gpu-1"}, extraPodName: {"exporter-x"}}
	aud := []string{"faultline-collector"}
	srv := &apiserver{tokens: map[string]authenticationv1.TokenReviewStatus{
		"good":      {Authenticated: true, Audiences: aud, User: user(exporter, onNode)},
		"other-aud": {Authenticated: true, Audiences: []string{"https://kubernetes.default.svc"}, User: user(exporter, onNode)},
		"other-sa":  {Authenticated: true, Audiences: aud, User: user("system:serviceaccount:default:intruder", onNode)},
		"no-node":   {Authenticated: true, Audiences: aud, User: user(exporter, nil)},
		"bad":       {Authenticated: false, Error: "token expired"},
	}}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	reader := sdkmetric.NewManualReader()
	set := componenttest.NewNopTelemetrySettings()
	set.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	a, err := newAuthenticator(cfg, set, clk)
	if err != nil {
		t.Fatal(err)
	}
	a.reviews = srv.review
	return fixture{authenticator: a, srv: srv, clk: clk, metrics: reader}
}

func bearer(tok string) map[string][]string {
	return map[string][]string{"Authorization": {"Bearer " + tok}}
}

func TestAuthenticate(t *testing.T) {
	a := newTest(t)
	ctx, err := a.Authenticate(context.Background(), bearer("good"))
	if err != nil {
		t.Fatal(err)
	}
	auth := client.FromContext(ctx).Auth
	if auth == nil || auth.GetAttribute(AttrNode) != "gpu-1" || auth.GetAttribute(AttrServiceAccount) != exporter ||
		auth.GetAttribute(AttrPod) != "exporter-x" {
		t.Fatalf("auth data %+v", auth)
	}
	for name, sources := range map[string]map[string][]string{
		"no header":            {},
		"two headers":          {"Authorization": {"Bearer good", "Bearer good"}},
		"basic":                {"authorization": {"Basic Z29vZA=="}},
		"empty bearer":         bearer(""),
		"oversized":            bearer(strings.Repeat("x", maxTokenBytes+1)),
		"not authenticated":    bearer("bad"),
		"wrong audience":       bearer("other-aud"),
		"other account":        bearer("other-sa"),
		"no node claim":        bearer("no-node"),
		"unknown to apiserver": bearer("nobody"),
	} {
		if _, err := a.Authenticate(context.Background(), sources); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %v, want ErrUnauthenticated", name, err)
		}
	}
	want := map[string]int64{refusedNoToken: 5, refusedUnauthenticated: 2, refusedAudience: 1, refusedAccount: 1, refusedNoNode: 1}
	if got := a.refused(t); !maps.Equal(got, want) {
		t.Errorf("refused requests by reason %v, want %v", got, want)
	}
	// gRPC metadata keys are lower case.
	if _, err := a.Authenticate(context.Background(), map[string][]string{"authorization": {"bearer good"}}); err != nil {
		t.Errorf("lower-case header and scheme: %v", err)
	}
}

func TestCache(t *testing.T) {
	f := newTest(t)
	a, srv, clk := f.authenticator, f.srv, f.clk
	auth := func(tok string) error { _, err := a.Authenticate(context.Background(), bearer(tok)); return err }

	for range 3 {
		if err := auth("good"); err != nil {
			t.Fatal(err)
		}
		_ = auth("bad")
	}
	if srv.reviews != 2 {
		t.Fatalf("%d TokenReviews for 3 requests of 2 tokens, want 2 (cached)", srv.reviews)
	}

	// Past the cache TTL the token is reviewed again, and refused once the
	// apiserver says so.
	clk.SetTime(clk.Now().Add(a.cfg.CacheTTL + time.Second))
	srv.tokens["good"] = authenticationv1.TokenReviewStatus{Authenticated: false, Error: "pod deleted"}
	if err := auth("good"); err == nil {
		t.Fatal("a token the apiserver no longer accepts is still accepted after the cache TTL")
	}

	// An accepted token outlives a brief apiserver outage (StaleTTL); a token never
	// reviewed does not, and neither does one past its stale time.
	f = newTest(t)
	a, srv, clk = f.authenticator, f.srv, f.clk
	auth = func(tok string) error { _, err := a.Authenticate(context.Background(), bearer(tok)); return err }
	if err := auth("good"); err != nil {
		t.Fatal(err)
	}
	srv.down = true
	clk.SetTime(clk.Now().Add(a.cfg.CacheTTL + time.Second))
	if err := auth("good"); err != nil {
		t.Errorf("apiserver down within the stale time: %v, want the earlier acceptance", err)
	}
	if err := auth("no-node"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("apiserver down, token never reviewed: %v, want refused", err)
	}
	clk.SetTime(clk.Now().Add(a.cfg.StaleTTL))
	if err := auth("good"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("apiserver down past the stale time: %v, want refused", err)
	}
	if got := f.refused(t); got[refusedReviewFailed] != 2 {
		t.Errorf("refused requests %v, want 2 review_failed", got)
	}

	// The cache is bounded.
	a.cfg.CacheSize = 2
	a, err := newAuthenticator(a.cfg, componenttest.NewNopTelemetrySettings(), clk)
	if err != nil {
		t.Fatal(err)
	}
	srv.down = false
	a.reviews = srv.review
	for _, tok := range []string{"t1", "t2", "t3", "t4"} {
		_ = auth(tok)
	}
	if n := len(a.cache.Keys()); n != 2 {
		t.Errorf("%d cached reviews, want at most cache_size 2", n)
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := createDefaultConfig()
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "audiences") || !strings.Contains(err.Error(), "service_accounts") {
		t.Errorf("empty config: %v, want audiences and service_accounts required", err)
	}
	cfg.Audiences = []string{"faultline-collector"}
	cfg.ServiceAccounts = []string{"faultline-dmesg-exporter"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "namespace/name") {
		t.Errorf("service account without namespace: %v", err)
	}
}

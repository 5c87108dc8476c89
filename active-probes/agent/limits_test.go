package agent_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/testenv"
)

// wantLimited checks a 429 with a Retry-After and the refusal counted under limit.
func wantLimited(t *testing.T, what string, err error, reg *prometheus.Registry, limit string, count int) {
	t.Helper()
	ae := wantCode(t, what, err, http.StatusTooManyRequests)
	if ae.RetryAfter < time.Second {
		t.Errorf("%s: Retry-After %s, want at least 1s", what, ae.RetryAfter)
	}
	want := "# HELP faultline_probe_agent_rate_limited_total Requests refused with 429 by the limit they met: runs (per minute), iperf3_servers, token_reviews.\n" +
		"# TYPE faultline_probe_agent_rate_limited_total counter\n"
	for _, l := range []string{"iperf3_servers", "runs", "token_reviews"} {
		n := 0
		if l == limit {
			n = count
		}
		want += `faultline_probe_agent_rate_limited_total{limit="` + l + `"} ` + strconv.Itoa(n) + "\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "faultline_probe_agent_rate_limited_total"); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// Each limit answers 429 with Retry-After and counts the refusal: runs per minute,
// iperf3 servers waiting at once (the real iperf3), and token reviews of tokens the
// agent has not cached, while a cached caller is still served.
func TestRateLimits(t *testing.T) {
	f := setup(t, nil)
	ctx := context.Background()

	t.Run("runs", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		var runs atomic.Int32
		_, url := serveAgentWith(t, f.asAgent, testRegistry(t, &runs, nil), agentOptions{runsPerMinute: 2, registerer: reg})
		c := f.client(f.tokens["controller"])
		c.BaseURL = url
		for i := 0; i < 2; i++ {
			if _, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"quick"}}); err != nil {
				t.Fatalf("run %d: %v", i+1, err)
			}
		}
		_, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"quick"}})
		wantLimited(t, "third run in a minute", err, reg, "runs", 1)
		if runs.Load() != 2 {
			t.Errorf("%d runs, want 2", runs.Load())
		}
	})

	t.Run("iperf3 servers", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		preg := probe.NewRegistry()
		spec, _ := probe.Default().Get(probe.Iperf3ServerCheck)
		preg.MustRegister(spec)
		ports := testenv.FreePorts(t, 2)
		first, second := ports[0], ports[1]
		_, url := serveAgentWith(t, f.asAgent, preg, agentOptions{registerer: reg,
			ports:  []probe.PortRange{{First: first, Last: first}, {First: second, Last: second}},
			config: probe.Config{MaxIperf3Servers: 1, Commands: map[string]string{"iperf3": testenv.Binary(t, "iperf3")}}})
		c := f.client(f.tokens["controller"])
		c.BaseURL = url
		serve := func(port int) error {
			_, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{probe.Iperf3ServerCheck},
				Params: map[string]probe.Params{probe.Iperf3ServerCheck: {"port": strconv.Itoa(port), "bind": "127.0.0.1", "idle_timeout": "30s"}}})
			return err
		}
		if err := serve(first); err != nil {
			t.Fatal(err)
		}
		err := serve(second)
		wantLimited(t, "a second iperf3 server", err, reg, "iperf3_servers", 1)
		if ae := err.(*agentapi.APIError); ae.RetryAfter < 20*time.Second || !strings.Contains(ae.Message, "1 iperf3 servers already wait") {
			t.Errorf("refusal %q, Retry-After %s: want the first server's idle timeout (about 30s)", ae.Message, ae.RetryAfter)
		}
	})

	t.Run("token reviews", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		var runs atomic.Int32
		// Two reviews, then one per 100 s: the controller's token uses one and is
		// cached, a random token the other, and the next random token is refused
		// without asking the apiserver.
		_, url := serveAgentWith(t, f.asAgent, testRegistry(t, &runs, nil), agentOptions{registerer: reg, reviewsPerSecond: 0.01, reviewBurst: 2})
		client := func(tok string) *agentapi.Client {
			c := f.client(tok)
			c.BaseURL = url
			return c
		}
		if _, err := client(f.tokens["controller"]).Checks(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := client("random-token-1").Checks(ctx)
		wantCode(t, "first random token", err, http.StatusUnauthorized)
		_, err = client("random-token-2").Checks(ctx)
		wantLimited(t, "second random token", err, reg, "token_reviews", 1)
		if ae := err.(*agentapi.APIError); ae.RetryAfter < 90*time.Second {
			t.Errorf("Retry-After %s, want about 100s", ae.RetryAfter)
		}
		if _, err := client(f.tokens["controller"]).Checks(ctx); err != nil {
			t.Errorf("the cached caller during the flood: %v", err)
		}
	})
}

package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/test/testenv"
)

// funcProbe is a probe whose behaviour a test sets.
type funcProbe struct {
	name string
	run  func(ctx context.Context, p probe.Params) (probe.Result, error)
}

func (f *funcProbe) Name() string { return f.name }
func (f *funcProbe) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	return f.run(ctx, p)
}

// testRegistry: "quick" (non-invasive, passes, reports its gbps parameter),
// "stress" (invasive, runs until the test closes release) and "cluster" (a check that
// runs in the controller, which an agent neither lists nor runs).
func testRegistry(t *testing.T, runs *atomic.Int32, release <-chan struct{}) *probe.Registry {
	reg := probe.NewRegistry()
	reg.MustRegister(probe.Spec{Name: "quick", Help: "quick check", DefaultEnabled: true,
		Params: probe.Schema{{Name: "gbps", Type: probe.TypeFloat, Default: "12", Min: 0, Max: 1000, Help: "value to report"}},
		New: func(probe.Config) probe.Probe {
			return &funcProbe{name: "quick", run: func(_ context.Context, p probe.Params) (probe.Result, error) {
				runs.Add(1)
				d := probe.DeviceResult{ID: "0", Status: probe.StatusPass}
				d.SetValue("h2d_gbps", p.Float("gbps"))
				return probe.Result{Devices: []probe.DeviceResult{d}}, nil
			}}
		}})
	reg.MustRegister(probe.Spec{Name: "cluster", Help: "cluster check", RunsOn: probe.OnController,
		New: func(probe.Config) probe.Probe {
			return &funcProbe{name: "cluster", run: func(context.Context, probe.Params) (probe.Result, error) {
				runs.Add(1)
				return probe.Result{Status: probe.StatusPass}, nil
			}}
		}})
	reg.MustRegister(probe.Spec{Name: "stress", Help: "stress test", Invasive: true, DefaultTimeout: time.Minute,
		New: func(probe.Config) probe.Probe {
			return &funcProbe{name: "stress", run: func(ctx context.Context, _ probe.Params) (probe.Result, error) {
				runs.Add(1)
				select {
				case <-release:
				case <-ctx.Done():
					return probe.Result{}, ctx.Err()
				}
				return probe.Result{Status: probe.StatusPass}, nil
			}}
		}})
	return reg
}

// bindClusterRole binds a ClusterRole to a ServiceAccount.
func bindClusterRole(t *testing.T, cs kubernetes.Interface, role *rbacv1.ClusterRole, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	if role.Rules != nil {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

type fixture struct {
	env    *testenv.Env
	url    string
	tokens map[string]string // by ServiceAccount
	runs   *atomic.Int32
}

// setup starts the apiserver, creates the agent's ServiceAccount with exactly the
// chart's faultline-probe-agent role, a controller bound to faultline-probe-runner, an
// admin bound to cluster-admin and a stranger with nothing, and serves an agent for
// node gpu-1 that talks to the apiserver as its own ServiceAccount.
func setup(t *testing.T, release <-chan struct{}) *fixture {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	f := &fixture{env: env, tokens: map[string]string{}, runs: &atomic.Int32{}}
	for _, sa := range []string{"agent", "controller", "admin", "stranger"} {
		f.tokens[sa] = env.ServiceAccountToken(t, "faultline", sa)
	}
	agentRole, runnerRole, err := rbac.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	bindClusterRole(t, cs, agentRole, "faultline", "agent")
	bindClusterRole(t, cs, runnerRole, "faultline", "controller")
	bindClusterRole(t, cs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"}}, "faultline", "admin")

	asAgent, err := kubernetes.NewForConfig(env.RESTConfigForToken(f.tokens["agent"]))
	if err != nil {
		t.Fatal(err)
	}
	f.url = serveAgent(t, asAgent, testRegistry(t, f.runs, release))
	return f
}

// serveAgent serves an agent for node gpu-1 that calls the apiserver with client.
func serveAgent(t *testing.T, client kubernetes.Interface, reg *probe.Registry) string {
	return serveAgentFor(t, client, reg, nil)
}

// serveAgentFor serves an agent for node gpu-1 that accepts tokens for audiences only
// (nil: the apiserver's).
func serveAgentFor(t *testing.T, client kubernetes.Interface, reg *probe.Registry, audiences []string) string {
	runner := probe.NewRunner(reg, probe.Config{Node: "gpu-1"}, nil)
	ag, err := agent.New(agent.Config{Node: "gpu-1", Runner: runner,
		Auth:    &kubeauth.Reviewer{Client: client, Audiences: audiences, NegativeTTL: time.Millisecond},
		GPUPods: agent.KubeGPUPods(client, "gpu-1"),
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ag.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// Every rule of faultline-probe-agent is needed: without it, the request that uses
// it fails (and runs nothing) instead of being served.
func TestAgentRoleMinimal(t *testing.T) {
	f := setup(t, nil)
	cs := f.env.Clientset()
	agentRole, _, err := rbac.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, rule := range agentRole.Rules {
		for _, verb := range rule.Verbs {
			name := fmt.Sprintf("%s-%s", rule.Resources[0], verb)
			t.Run(name, func(t *testing.T) {
				role := agentRole.DeepCopy()
				role.Name = "agent-without-" + name
				role.Rules = append(append([]rbacv1.PolicyRule{}, agentRole.Rules[:i]...), agentRole.Rules[i+1:]...)
				if r := without(rule, verb); len(r.Verbs) > 0 {
					role.Rules = append(role.Rules, r)
				}
				sa := "agent-" + strings.ReplaceAll(name, ".", "-")
				token := f.env.ServiceAccountToken(t, "faultline", sa)
				bindClusterRole(t, cs, role, "faultline", sa)
				client, err := kubernetes.NewForConfig(f.env.RESTConfigForToken(token))
				if err != nil {
					t.Fatal(err)
				}
				var runs atomic.Int32
				url := serveAgent(t, client, testRegistry(t, &runs, closedChan()))
				c := &agent.Client{BaseURL: url, Token: func() (string, error) { return f.tokens["controller"], nil }}
				// The invasive check needs all three: token review, access review, pod list.
				_, err = c.Run(ctx, agent.RunRequest{Checks: []string{"stress"}})
				ae := wantCode(t, "agent without "+name, err, http.StatusServiceUnavailable)
				if !strings.Contains(ae.Message, "forbidden") {
					t.Errorf("message %q should say the agent was forbidden", ae.Message)
				}
				if runs.Load() != 0 {
					t.Error("the probe ran")
				}
			})
		}
	}
}

func without(r rbacv1.PolicyRule, verb string) rbacv1.PolicyRule {
	out := *r.DeepCopy()
	out.Verbs = nil
	for _, v := range r.Verbs {
		if v != verb {
			out.Verbs = append(out.Verbs, v)
		}
	}
	return out
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (f *fixture) client(token string) *agent.Client {
	return &agent.Client{BaseURL: f.url, Token: func() (string, error) { return token, nil }}
}

func wantCode(t *testing.T, what string, err error, code int) *agent.APIError {
	t.Helper()
	var ae *agent.APIError
	if !errors.As(err, &ae) || ae.Code != code {
		t.Fatalf("%s: want HTTP %d, got %v", what, code, err)
	}
	return ae
}

// Authentication and authorization against the real apiserver: no token, a random
// token and a ServiceAccount without the role are refused; the controller's account
// and an admin are served.
func TestAuth(t *testing.T) {
	f := setup(t, nil)
	ctx := context.Background()
	req := agent.RunRequest{Checks: []string{"quick"}}

	resp, err := http.Post(f.url+agent.PathRun, "application/json", strings.NewReader(`{"checks":["quick"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	_, err = f.client("not-a-token-"+strings.Repeat("x", 40)).Run(ctx, req)
	wantCode(t, "random token", err, http.StatusUnauthorized)
	_, err = f.client(f.tokens["stranger"]).Run(ctx, req)
	ae := wantCode(t, "ServiceAccount without the role", err, http.StatusForbidden)
	if !strings.Contains(ae.Message, "system:serviceaccount:faultline:stranger") || !strings.Contains(ae.Message, "gpu-1") {
		t.Errorf("forbidden message %q should name the caller and the node", ae.Message)
	}
	_, err = f.client(f.tokens["stranger"]).Checks(ctx)
	wantCode(t, "stranger listing checks", err, http.StatusForbidden)
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("%d probe runs for refused requests", n)
	}

	for _, who := range []string{"controller", "admin"} {
		out, err := f.client(f.tokens[who]).Run(ctx, agent.RunRequest{Checks: []string{"quick"},
			Params: map[string]probe.Params{"quick": {"gbps": "7.5"}}})
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if out.Node != "gpu-1" || len(out.Results) != 1 || out.Results[0].Status != probe.StatusPass ||
			out.Results[0].Devices[0].Values["h2d_gbps"] != 7.5 {
			t.Errorf("%s: %+v", who, out)
		}
	}
	checks, err := f.client(f.tokens["controller"]).Checks(ctx)
	if err != nil || len(checks) != 2 || checks[0].Name != "quick" || !checks[1].Invasive {
		t.Errorf("checks: %+v %v", checks, err)
	}
}

// An agent that takes only tokens for its own audience (the chart's setting) refuses
// the caller's ServiceAccount token for the apiserver's audience, so a token lifted
// from a probe call is good for nothing else, and no other token is good for it.
func TestAudience(t *testing.T) {
	f := setup(t, nil)
	ctx := context.Background()
	asAgent, err := kubernetes.NewForConfig(f.env.RESTConfigForToken(f.tokens["agent"]))
	if err != nil {
		t.Fatal(err)
	}
	url := serveAgentFor(t, asAgent, testRegistry(t, f.runs, nil), []string{agent.TokenAudience})
	client := func(tok string) *agent.Client {
		c := f.client(tok)
		c.BaseURL = url
		return c
	}
	_, err = client(f.tokens["controller"]).Checks(ctx)
	wantCode(t, "the apiserver's audience", err, http.StatusUnauthorized)
	tok := f.env.PodToken(t, "faultline", "controller", "gpu-1", []string{agent.TokenAudience})
	if _, err := client(tok).Checks(ctx); err != nil {
		t.Errorf("a token for %s: %v", agent.TokenAudience, err)
	}
	other := f.env.PodToken(t, "faultline", "controller", "gpu-1", []string{"faultline-collector"})
	_, err = client(other).Checks(ctx)
	wantCode(t, "another audience", err, http.StatusUnauthorized)
}

// Bad requests run nothing: unknown check, invalid or unknown parameter, parameters
// for a check not asked for, unknown JSON field.
func TestValidation(t *testing.T) {
	f := setup(t, nil)
	c := f.client(f.tokens["controller"])
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  agent.RunRequest
		want string
	}{
		{"unknown check", agent.RunRequest{Checks: []string{"quick", "rm -rf"}}, `unknown probe "rm -rf"`},
		{"bad value", agent.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"quick": {"gbps": "lots"}}}, `"gbps"`},
		{"out of range", agent.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"quick": {"gbps": "-1"}}}, `"gbps"`},
		{"unknown param", agent.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"quick": {"cmd": "x"}}}, `unknown parameter`},
		{"params of another check", agent.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"stress": {}}}, `not among the checks`},
		{"twice", agent.RunRequest{Checks: []string{"quick", "quick"}}, `named twice`},
		{"a controller check", agent.RunRequest{Checks: []string{"cluster"}}, `runs in the controller`},
	} {
		_, err := c.Run(ctx, tc.req)
		ae := wantCode(t, tc.name, err, http.StatusBadRequest)
		if !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%s: message %q lacks %q", tc.name, ae.Message, tc.want)
		}
	}
	resp, err := http.DefaultClient.Do(mustReq(t, f.url+agent.PathRun, `{"checks":["quick"],"shell":"sh"}`, f.tokens["controller"]))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown field: %d", resp.StatusCode)
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("%d probe runs for bad requests", n)
	}
	// No checks named: the default-enabled ones run.
	out, err := c.Run(ctx, agent.RunRequest{})
	if err != nil || len(out.Results) != 1 || out.Results[0].Check != "quick" {
		t.Errorf("default checks: %+v %v", out, err)
	}
}

func mustReq(t *testing.T, url, body, token string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// Invasive probes: refused while a pod on the node holds nvidia.com/gpu (unless
// forced), and one at a time, while non-invasive checks still run.
func TestInvasive(t *testing.T) {
	release := make(chan struct{})
	f := setup(t, release)
	cs := f.env.Clientset()
	ctx := context.Background()
	c := f.client(f.tokens["controller"])

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "training"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, node string, gpus int64) *corev1.Pod {
		res := corev1.ResourceList{}
		if gpus > 0 {
			res[agent.GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "training"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "trainer",
				Resources: corev1.ResourceRequirements{Limits: res, Requests: res}}}}}
	}
	for _, p := range []*corev1.Pod{pod("llm-0", "gpu-1", 8), pod("sidecar", "gpu-1", 0), pod("llm-1", "gpu-2", 8)} {
		if _, err := cs.CoreV1().Pods("training").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Run(ctx, agent.RunRequest{Checks: []string{"stress"}})
	ae := wantCode(t, "invasive under a GPU pod", err, http.StatusConflict)
	if len(ae.Pods) != 1 || ae.Pods[0] != "training/llm-0" {
		t.Errorf("pods named: %v (want only training/llm-0: sidecar holds no GPU, llm-1 is on another node)", ae.Pods)
	}
	if f.runs.Load() != 0 {
		t.Fatal("refused invasive probe ran")
	}

	// Forced: it runs; meanwhile a second invasive run is refused and a quick one is not.
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, agent.RunRequest{Checks: []string{"stress"}, Force: true})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for f.runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	_, err = c.Run(ctx, agent.RunRequest{Checks: []string{"stress"}, Force: true})
	ae = wantCode(t, "second invasive run", err, http.StatusConflict)
	if !strings.Contains(ae.Message, "one at a time") {
		t.Errorf("message %q", ae.Message)
	}
	if out, err := c.Run(ctx, agent.RunRequest{Checks: []string{"quick"}}); err != nil || out.Results[0].Status != probe.StatusPass {
		t.Errorf("quick check during a stress test: %+v %v", out, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("forced run: %v", err)
	}

	// The GPU pod finished: invasive probes run without force.
	p, err := cs.CoreV1().Pods("training").Get(ctx, "llm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, err := cs.CoreV1().Pods("training").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(ctx, agent.RunRequest{Checks: []string{"stress"}})
	if err != nil || out.Results[0].Status != probe.StatusPass {
		t.Errorf("invasive run on an idle node: %+v %v", out, err)
	}
}

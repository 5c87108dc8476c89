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

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	// The node checks' implementations, as the agent's program links them.
	_ "github.com/faultline-dev/faultline/active-probes/checks"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// funcProbe is a probe whose behaviour a test sets.
type funcProbe struct {
	name string
	run  func(ctx context.Context, p probe.Params) (probe.Result, error)
}

func (f *funcProbe) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	return f.run(ctx, p)
}

// testRegistry: "quick" (non-invasive, passes, reports its gbps parameter), "reach"
// (non-invasive, aims at a peer), "stress" (invasive, runs until the test closes
// release) and "cluster" (a check that runs in the controller, which an agent neither
// lists nor runs).
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
	reg.MustRegister(probe.Spec{Name: "reach", Help: "reach a peer", Peer: true,
		Params: probe.Schema{{Name: "peer", Type: probe.TypeHost, Target: probe.TargetPeer, Required: true, Help: "peer"}},
		New: func(probe.Config) probe.Probe {
			return &funcProbe{name: "reach", run: func(context.Context, probe.Params) (probe.Result, error) {
				runs.Add(1)
				return probe.Result{Status: probe.StatusPass}, nil
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
	env     *testenv.Env
	url     string
	agent   *agent.Agent
	kubelet *testenv.PodResources // the kubelet API the agent asks
	asAgent kubernetes.Interface
	tokens  map[string]string // by ServiceAccount
	runs    *atomic.Int32
}

// Nodes of the fixture: the agent's own, and a peer node; both are agent nodes
// (label agentNodeLabel), the outsider is not.
const (
	agentNodeLabel = "nvidia.com/gpu.present"
	peerAddress    = "10.0.0.2"
)

// setup starts the apiserver, creates the agent's ServiceAccount with exactly the
// chart's faultline-probe-agent role, a controller bound to faultline-probe-runner, an
// admin bound to cluster-admin and a stranger with nothing, nodes gpu-1 (the
// agent's), gpu-2 (a peer agent node, at peerAddress) and cpu-1 (no agent, at
// 10.0.0.3), and serves an agent for node gpu-1 that talks to the apiserver as its
// own ServiceAccount and asks a kubelet that reports no GPU pods.
func setup(t *testing.T, release <-chan struct{}) *fixture {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	cs := env.Clientset()
	f := &fixture{env: env, tokens: map[string]string{}, runs: &atomic.Int32{}, kubelet: testenv.StartPodResources(t)}
	for name, addr := range map[string]string{"gpu-1": "10.0.0.1", "gpu-2": peerAddress, "cpu-1": "10.0.0.3"} {
		createNode(t, cs, name, addr, strings.HasPrefix(name, "gpu-"))
	}
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
	f.asAgent = asAgent
	f.agent, f.url = serveAgentWith(t, asAgent, testRegistry(t, f.runs, release), agentOptions{kubelet: f.kubelet.Socket})
	return f
}

// createNode creates a Node with an internal address, labelled as an agent node
// when agentNode.
func createNode(t *testing.T, cs kubernetes.Interface, name, addr string, agentNode bool) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if agentNode {
		n.Labels[agentNodeLabel] = "true"
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	n, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}, {Type: corev1.NodeHostName, Address: name}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// agentOptions are what test agents differ in; the zero value is the chart's
// defaults, with peers the agent nodes of the fixture.
type agentOptions struct {
	audiences        []string // nil: the apiserver's
	kubelet          string   // PodResources socket ("": none, invasive checks need force)
	runsPerMinute    int
	reviewsPerSecond float64
	reviewBurst      int
	config           probe.Config
	ports            []probe.PortRange // nil: probe.DefaultPorts
	timeouts         map[string]time.Duration
	registerer       prometheus.Registerer
	verdicts         agent.Verdicts
}

// serveAgent serves an agent for node gpu-1 that calls the apiserver with client.
func serveAgent(t *testing.T, client kubernetes.Interface, reg *probe.Registry) string {
	_, url := serveAgentWith(t, client, reg, agentOptions{})
	return url
}

// serveAgentWith serves an agent for node gpu-1 that calls the apiserver with client.
func serveAgentWith(t *testing.T, client kubernetes.Interface, reg *probe.Registry, o agentOptions) (*agent.Agent, string) {
	o.config.Node = "gpu-1"
	if o.ports == nil {
		o.ports = probe.DefaultPorts
	}
	runner := probe.NewRunner(reg, o.config, nil)
	for check, d := range o.timeouts {
		runner.SetTimeout(check, d)
	}
	cfg := agent.Config{Node: "gpu-1", Runner: runner, Nodes: client, RunsPerMinute: o.runsPerMinute, Registerer: o.registerer,
		Verdicts: o.verdicts,
		Auth: &kubeauth.Reviewer{Client: client, Audiences: o.audiences, NegativeTTL: time.Millisecond,
			ReviewsPerSecond: o.reviewsPerSecond, ReviewBurst: o.reviewBurst},
		Allow: probe.AllowList{PeerNodes: agent.KubePeerNodes(client, agentNodeLabel+"=true"),
			Hostengines: probe.DefaultHostengines, FileDirs: []string{probe.DefaultProbeFileDir}, Ports: o.ports},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if o.kubelet != "" {
		cfg.GPUPods = agent.KubeletGPUPods(agent.GPUResources{Socket: o.kubelet})
	}
	ag, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ag.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(ag.Close)
	return ag, srv.URL
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
				_, url := serveAgentWith(t, client, testRegistry(t, &runs, closedChan()), agentOptions{kubelet: f.kubelet.Socket})
				c := &agentapi.Client{BaseURL: url, Token: func() (string, error) { return f.tokens["controller"], nil }}
				// The invasive check needs the reviews and the node (get, update: the
				// probing taint); a peer check needs the node list (the agent nodes).
				req := agentapi.RunRequest{Checks: []string{"stress"}}
				if rule.Resources[0] == "nodes" && verb == "list" {
					req = agentapi.RunRequest{Checks: []string{"reach"}, Params: map[string]probe.Params{"reach": {"peer": peerAddress}}}
				}
				_, err = c.Run(ctx, req)
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

func (f *fixture) client(token string) *agentapi.Client {
	return &agentapi.Client{BaseURL: f.url, Token: func() (string, error) { return token, nil }}
}

func wantCode(t *testing.T, what string, err error, code int) *agentapi.APIError {
	t.Helper()
	var ae *agentapi.APIError
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
	req := agentapi.RunRequest{Checks: []string{"quick"}}

	resp, err := http.Post(f.url+agentapi.PathRun, "application/json", strings.NewReader(`{"checks":["quick"]}`))
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
		out, err := f.client(f.tokens[who]).Run(ctx, agentapi.RunRequest{Checks: []string{"quick"},
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
	if err != nil || len(checks) != 3 || checks[0].Name != "quick" || checks[1].Name != "reach" || !checks[2].Invasive {
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
	_, url := serveAgentWith(t, asAgent, testRegistry(t, f.runs, nil), agentOptions{audiences: []string{agentapi.TokenAudience}})
	client := func(tok string) *agentapi.Client {
		c := f.client(tok)
		c.BaseURL = url
		return c
	}
	_, err = client(f.tokens["controller"]).Checks(ctx)
	wantCode(t, "the apiserver's audience", err, http.StatusUnauthorized)
	tok := f.env.PodToken(t, "faultline", "controller", "gpu-1", []string{agentapi.TokenAudience})
	if _, err := client(tok).Checks(ctx); err != nil {
		t.Errorf("a token for %s: %v", agentapi.TokenAudience, err)
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
		req  agentapi.RunRequest
		want string
	}{
		{"unknown check", agentapi.RunRequest{Checks: []string{"quick", "rm -rf"}}, `unknown probe "rm -rf"`},
		{"bad value", agentapi.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"quick": {"gbps": "lots"}}}, `"gbps"`},
		{"out of range", agentapi.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"quick": {"gbps": "-1"}}}, `"gbps"`},
		{"unknown param", agentapi.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"quick": {"cmd": "x"}}}, `unknown parameter`},
		{"params of another check", agentapi.RunRequest{Checks: []string{"quick"}, Params: map[string]probe.Params{"stress": {}}}, `not among the checks`},
		{"twice", agentapi.RunRequest{Checks: []string{"quick", "quick"}}, `named twice`},
		{"a controller check", agentapi.RunRequest{Checks: []string{"cluster"}}, `runs in the controller`},
		{"a peer without an agent", agentapi.RunRequest{Checks: []string{"reach"}, Params: map[string]probe.Params{"reach": {"peer": "10.0.0.3"}}},
			`parameter "peer"="10.0.0.3": not an address of a node that runs the probe agent`},
		{"a peer outside the cluster", agentapi.RunRequest{Checks: []string{"reach"}, Params: map[string]probe.Params{"reach": {"peer": "192.0.2.7"}}},
			`not an address of a node that runs the probe agent`},
	} {
		_, err := c.Run(ctx, tc.req)
		ae := wantCode(t, tc.name, err, http.StatusBadRequest)
		if !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%s: message %q lacks %q", tc.name, ae.Message, tc.want)
		}
	}
	resp, err := http.DefaultClient.Do(mustReq(t, f.url+agentapi.PathRun, `{"checks":["quick"],"shell":"sh"}`, f.tokens["controller"]))
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
	// Peers that are agent nodes, by address or name, are allowed.
	for _, peer := range []string{peerAddress, "gpu-2"} {
		if out, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"reach"}, Params: map[string]probe.Params{"reach": {"peer": peer}}}); err != nil || out.Results[0].Status != probe.StatusPass {
			t.Errorf("peer %s: %+v %v", peer, out, err)
		}
	}
	if n := f.runs.Swap(0); n != 2 {
		t.Errorf("%d runs of reach, want 2", n)
	}
	// No checks named: the default-enabled ones run.
	out, err := c.Run(ctx, agentapi.RunRequest{})
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

// Invasive probes: refused while the kubelet reports a container holding a GPU
// (unless forced), one at a time while non-invasive checks still run, and the node
// carries faultline.io/probing:NoSchedule exactly while one runs, also when the caller
// hangs up mid-probe.
func TestInvasive(t *testing.T) {
	release := make(chan struct{})
	f := setup(t, release)
	ctx := context.Background()
	c := f.client(f.tokens["controller"])

	f.kubelet.SetPods(testenv.PodWithDevices("training", "llm-0", map[string][]string{"nvidia.com/mig-3g.40gb": {"MIG-0"}}, nil),
		testenv.PodWithDevices("training", "sidecar", nil, nil))
	_, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"stress"}})
	ae := wantCode(t, "invasive under a GPU pod", err, http.StatusConflict)
	if len(ae.Pods) != 1 || !strings.HasPrefix(ae.Pods[0], "training/llm-0 ") || !strings.Contains(ae.Message, "nvidia.com/mig-3g.40gb") {
		t.Errorf("refusal %q names pods %q (want only training/llm-0 and its MIG device)", ae.Message, ae.Pods)
	}
	if f.runs.Load() != 0 {
		t.Fatal("refused invasive probe ran")
	}
	if tainted(t, f) {
		t.Fatal("a refused probe tainted the node")
	}
	// A request mixing it with a harmless check: the harmless one runs, the
	// invasive one is refused alone (and has an error result, in the order asked).
	out, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"stress", "quick"}})
	if err != nil {
		t.Fatalf("mixed request under a GPU pod: %v", err)
	}
	if len(out.Results) != 2 || out.Results[0].Check != "stress" || out.Results[0].Status != probe.StatusError ||
		!strings.HasPrefix(out.Results[0].Message, "not run: ") || out.Results[1].Check != "quick" || out.Results[1].Status != probe.StatusPass {
		t.Errorf("mixed request's results: %+v", out.Results)
	}
	if len(out.Refused) != 1 || out.Refused[0].Check != "stress" || out.Refused[0].Code != http.StatusConflict ||
		len(out.Refused[0].Pods) != 1 || !strings.HasPrefix(out.Refused[0].Pods[0], "training/llm-0 ") {
		t.Errorf("mixed request's refusals: %+v", out.Refused)
	}
	if n := f.runs.Swap(0); n != 1 || tainted(t, f) {
		t.Fatalf("%d check(s) of the mixed request ran (want 1, the harmless one), or the node was tainted", n)
	}

	// Forced: it runs under the taint; meanwhile a second invasive run is refused and
	// a quick one is not.
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"stress"}, Force: true})
		done <- err
	}()
	eventually.True(t, 10*time.Second, "the forced stress test runs", func() bool { return f.runs.Load() == 1 })
	if !tainted(t, f) {
		t.Error("no probing taint while an invasive probe runs")
	}
	_, err = c.Run(ctx, agentapi.RunRequest{Checks: []string{"stress"}, Force: true})
	ae = wantCode(t, "second invasive run", err, http.StatusConflict)
	if !strings.Contains(ae.Message, "one at a time") {
		t.Errorf("message %q", ae.Message)
	}
	if out, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"quick"}}); err != nil || out.Results[0].Status != probe.StatusPass {
		t.Errorf("quick check during a stress test: %+v %v", out, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("forced run: %v", err)
	}
	if tainted(t, f) {
		t.Error("the probing taint outlived the probe")
	}

	// The GPU pod ended: invasive probes run without force.
	f.kubelet.SetPods(testenv.PodWithDevices("training", "sidecar", nil, nil))
	out, err = c.Run(ctx, agentapi.RunRequest{Checks: []string{"stress"}})
	if err != nil || out.Results[0].Status != probe.StatusPass {
		t.Errorf("invasive run on an idle node: %+v %v", out, err)
	}

	// A kubelet that does not answer is no "idle node": 503, nothing runs.
	runsBefore := f.runs.Load()
	_, url := serveAgentWith(t, f.asAgent, testRegistry(t, f.runs, closedChan()), agentOptions{kubelet: f.kubelet.Socket + ".gone"})
	down := f.client(f.tokens["controller"])
	down.BaseURL = url
	_, err = down.Run(ctx, agentapi.RunRequest{Checks: []string{"stress"}})
	if ae := wantCode(t, "no kubelet", err, http.StatusServiceUnavailable); !strings.Contains(ae.Message, "kubelet pod resources") {
		t.Errorf("message %q should say the kubelet could not be asked", ae.Message)
	}
	if f.runs.Load() != runsBefore || tainted(t, f) {
		t.Error("an invasive probe ran, or tainted the node, without the kubelet's answer")
	}
}

// tainted reports whether gpu-1 carries the probing taint; the node's other taints
// must be untouched.
func tainted(t *testing.T, f *fixture) bool {
	t.Helper()
	n, err := f.env.Clientset().CoreV1().Nodes().Get(context.Background(), "gpu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	has := false
	for _, tn := range n.Spec.Taints {
		switch {
		case tn.MatchTaint(&agent.ProbingTaint):
			has = true
		case tn.Key != "nvidia.com/gpu" && !strings.HasPrefix(tn.Key, "node.kubernetes.io/"): // the apiserver's not-ready
			t.Errorf("unexpected taint %s", tn.ToString())
		}
	}
	if !hasTaint(n.Spec.Taints, "nvidia.com/gpu") {
		t.Error("the node's own taint nvidia.com/gpu is gone")
	}
	return has
}

func hasTaint(ts []corev1.Taint, key string) bool {
	for _, tn := range ts {
		if tn.Key == key {
			return true
		}
	}
	return false
}

// The taint goes also when the probe fails: the caller hangs up mid-probe, which
// ends the probe, or the probe times out. An agent that starts removes a taint a crashed one left, but
// not the taint of a run in progress.
func TestProbingTaintRemoved(t *testing.T) {
	f := setup(t, nil) // stress runs until its context ends
	c := f.client(f.tokens["controller"])
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"stress"}})
		done <- err
	}()
	eventually.True(t, 10*time.Second, "the stress test runs under the taint", func() bool { return f.runs.Load() == 1 && tainted(t, f) })
	// A stale-taint removal meanwhile (an agent's start racing its first run) leaves
	// the running probe's taint alone.
	if err := f.agent.RemoveProbingTaint(context.Background()); err != nil || !tainted(t, f) {
		t.Errorf("stale-taint removal during a run: %v, tainted %v", err, tainted(t, f))
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a run whose caller hung up succeeded")
	}
	eventually.True(t, 10*time.Second, "the taint is removed after the abandoned run", func() bool { return !tainted(t, f) })

	// A probe that times out: an error result, and the taint is gone when it comes.
	_, url := serveAgentWith(t, f.asAgent, testRegistry(t, f.runs, nil), agentOptions{kubelet: f.kubelet.Socket, timeouts: map[string]time.Duration{"stress": 300 * time.Millisecond}})
	c.BaseURL = url
	out, err := c.Run(context.Background(), agentapi.RunRequest{Checks: []string{"stress"}})
	if err != nil || out.Results[0].Status != probe.StatusError || !strings.Contains(out.Results[0].Message, "timed out") {
		t.Errorf("a stress test past its timeout: %+v %v", out, err)
	}
	if tainted(t, f) {
		t.Error("the probing taint outlived a probe that timed out")
	}

	// A crashed agent's taint: the next agent removes it at start.
	cs := f.env.Clientset()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "gpu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, agent.ProbingTaint)
	if _, err := cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.agent.RemoveProbingTaint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tainted(t, f) {
		t.Error("a stale probing taint survived the agent's start")
	}
}

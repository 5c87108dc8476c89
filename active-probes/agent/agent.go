// Package agent is faultline's probe agent: the process on every GPU node that runs
// active probes when the controller (or an admin) asks, over an authenticated HTTP API.
//
// Safety comes before convenience here, because a probe can load a GPU for minutes:
//   - every API request is authenticated (TokenReview) and authorized
//     (SubjectAccessReview on probes.faultline.io, named after the node);
//   - parameters are validated against each probe's schema before anything runs, and
//     programs run with an argument vector, never a shell (package probe);
//   - at most one invasive probe runs on the node at a time: a second request is
//     refused with 409, not queued behind a stress test;
//   - invasive probes refuse to run while containers on the node hold GPU devices (the
//     kubelet's PodResources API), unless the request says force, and the node carries
//     the faultline.io/probing:NoSchedule taint while one runs; the harmless checks of
//     a request run whatever holds the GPUs (its invasive ones are then refused, each);
//   - parameters that name hosts or files must be on the operator's allow-lists;
//   - runs per minute, iperf3 servers and token reviews are rate limited (429).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/kubeauth"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
)

// Config configures an Agent.
type Config struct {
	Node   string
	Runner *probe.Runner
	// Auth checks every /api/ request; nil refuses them all (there is no open mode).
	// The agent checks verb create (run, iperf3 server) or get (list checks) on
	// probes.faultline.io named after its node.
	Auth kubeauth.Authorizer
	// GPUPods finds pods holding GPUs (KubeletGPUPods); nil means none can be found,
	// and invasive probes then need force.
	GPUPods GPUPods
	// Nodes places ProbingTaint on the node while an invasive probe runs; nil refuses
	// invasive probes, which must not load GPUs the scheduler may still fill.
	Nodes kubernetes.Interface
	// Allow holds parameters that name hosts or files to the operator's allow-lists.
	Allow probe.AllowList
	// RunsPerMinute bounds the runs (POST /run) the agent starts per minute, with a
	// burst of as many (0: DefaultRunsPerMinute).
	RunsPerMinute int
	// MaxBody bounds request bodies (default 64 KiB).
	MaxBody int64
	// Verdicts receives every result the agent answers with and the trigger the
	// caller named (probelines.Lines ships each as a source="probe" line); nil: none.
	Verdicts Verdicts
	// Registerer receives the agent's request metrics (nil: none).
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Verdicts receives the results of runs; Report must not block.
type Verdicts interface {
	Report(res probe.Result, trigger string)
}

// validTrigger is what a run's trigger may be (the controller's triggers are short
// lower-case words): it is written into a log line.
var validTrigger = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// DefaultRunsPerMinute bounds the runs an agent starts per minute when
// Config.RunsPerMinute is unset: far above what the controller asks of one node (a
// few checks per fault), far below what would keep its GPUs or network busy.
const DefaultRunsPerMinute = 30

// Agent serves the probe API of one node.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	runs     *rate.Limiter
	requests *prometheus.CounterVec
	limited  *prometheus.CounterVec
}

// New returns an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Node == "" || cfg.Runner == nil {
		return nil, errors.New("agent: node and runner are required")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 10
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.RunsPerMinute <= 0 {
		cfg.RunsPerMinute = DefaultRunsPerMinute
	}
	a := &Agent{cfg: cfg, log: cfg.Log.With("node", cfg.Node),
		runs: rate.NewLimiter(rate.Limit(float64(cfg.RunsPerMinute)/60), cfg.RunsPerMinute),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_probe_agent_requests_total",
			Help: "API requests by endpoint and HTTP status code."}, []string{"endpoint", "code"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_probe_agent_rate_limited_total",
			Help: "Requests refused with 429 by the limit they met: runs (per minute), iperf3_servers, token_reviews."}, []string{"limit"})}
	for _, l := range []string{limitRuns, limitIperf3Servers, limitTokenReviews} {
		a.limited.WithLabelValues(l)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(a.requests, a.limited)
	}
	return a, nil
}

// Handler returns the API handler (mount /metrics and /healthz beside it).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+agentapi.PathChecks, a.authorized("get", agentapi.PathChecks, a.checks))
	mux.Handle("POST "+agentapi.PathRun, a.authorized("create", agentapi.PathRun, a.run))
	return mux
}

// handlerFunc answers a request; a non-nil error is written as its status and body.
type handlerFunc func(w http.ResponseWriter, r *http.Request, user string) *httpError

type httpError struct {
	code       int
	body       agentapi.ErrorResponse
	retryAfter time.Duration // 429: when to come back
}

func errorf(code int, format string, args ...any) *httpError {
	return &httpError{code: code, body: agentapi.ErrorResponse{Error: fmt.Sprintf(format, args...)}}
}

// The limits a 429 names (the limit label of faultline_probe_agent_rate_limited_total).
const (
	limitRuns          = "runs"
	limitIperf3Servers = "iperf3_servers"
	limitTokenReviews  = "token_reviews"
)

// tooMany refuses a request over a limit, and counts it.
func (a *Agent) tooMany(limit string, retryAfter time.Duration, format string, args ...any) *httpError {
	a.limited.WithLabelValues(limit).Inc()
	e := errorf(http.StatusTooManyRequests, format, args...)
	e.retryAfter = retryAfter
	return e
}

func (a *Agent) authorized(verb, endpoint string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		defer func() { a.requests.WithLabelValues(endpoint, fmt.Sprint(code)).Inc() }()
		fail := func(e *httpError) {
			code = e.code
			if e.code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", strconv.Itoa(int(max((e.retryAfter+time.Second-1)/time.Second, 1))))
			}
			writeJSON(w, e.code, e.body)
		}
		if a.cfg.Auth == nil {
			fail(errorf(http.StatusForbidden, "no authorizer configured"))
			return
		}
		token := kubeauth.BearerToken(r)
		if token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="faultline-probe-agent"`)
			fail(errorf(http.StatusUnauthorized, "a bearer token is required"))
			return
		}
		user, err := a.cfg.Auth.Authorize(r.Context(), token, kubeauth.Action{Verb: verb, Resource: agentapi.Resource, Name: a.cfg.Node})
		switch {
		case errors.Is(err, kubeauth.ErrUnauthenticated):
			a.log.Warn("request refused: unauthenticated", "endpoint", endpoint, "remote", r.RemoteAddr, "err", err)
			fail(errorf(http.StatusUnauthorized, "%v", err))
			return
		case errors.Is(err, kubeauth.ErrRateLimited):
			// Not logged: a flood of tokens would become a flood of log lines.
			fail(a.tooMany(limitTokenReviews, kubeauth.RetryAfter(err), "%v", err))
			return
		case errors.Is(err, kubeauth.ErrForbidden):
			a.log.Warn("request refused: forbidden", "endpoint", endpoint, "user", user, "remote", r.RemoteAddr, "err", err)
			fail(errorf(http.StatusForbidden, "%v", err))
			return
		case err != nil:
			fail(errorf(http.StatusServiceUnavailable, "cannot check the caller's token: %v", err))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxBody)
		if e := h(w, r, user); e != nil {
			fail(e)
		}
	})
}

func (a *Agent) checks(w http.ResponseWriter, r *http.Request, _ string) *httpError {
	var out []agentapi.CheckInfo
	for _, s := range a.cfg.Runner.Registry().List() {
		if s.RunsOn != probe.OnNode {
			continue // not for an agent to run
		}
		out = append(out, agentapi.CheckInfo{Name: s.Name, Help: s.Help, DefaultEnabled: s.DefaultEnabled,
			Invasive: s.Invasive, Peer: s.Peer, PeerServer: s.PeerServer, Timeout: s.Timeout(nil), Params: s.Params})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// planned is a check of a request, validated before anything runs.
type planned struct {
	name     string
	params   probe.Params
	invasive bool
}

func (a *Agent) run(w http.ResponseWriter, r *http.Request, user string) *httpError {
	var req agentapi.RunRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return errorf(http.StatusBadRequest, "request body: %v", err)
	}
	req.Trigger = r.URL.Query().Get(agentapi.QueryTrigger)
	if req.Trigger != "" && !validTrigger.MatchString(req.Trigger) {
		return errorf(http.StatusBadRequest, "trigger %q: want a lower-case word", req.Trigger)
	}
	plan, err := a.plan(r.Context(), req)
	if errors.Is(err, probe.ErrCannotCheck) {
		return errorf(http.StatusServiceUnavailable, "%v", err)
	}
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	if res := a.runs.Reserve(); res.Delay() > 0 {
		wait := res.Delay()
		res.Cancel()
		return a.tooMany(limitRuns, wait, "more than %d runs per minute on %s", a.cfg.RunsPerMinute, a.cfg.Node)
	}
	var invasive []string
	for _, p := range plan {
		if p.invasive {
			invasive = append(invasive, p.name)
		}
	}
	ctx := r.Context()
	resp := agentapi.RunResponse{Node: a.cfg.Node}
	if len(invasive) > 0 {
		what := strings.Join(invasive, ",")
		claim, e := a.startInvasive(ctx, what, req.Force)
		switch {
		case e != nil && len(invasive) == len(plan):
			return e
		case e != nil:
			// A mixed request: what holds the GPUs never stops the harmless checks.
			// They run; each invasive one is answered as refused, not run.
			a.log.Info("invasive checks refused, the others run", "refused", invasive, "err", e.body.Error, "user", user)
			plan = a.refuse(&resp, plan, e)
		default:
			defer claim.Release()
			defer a.untaint(ctx)
			ctx = probe.WithClaim(ctx, claim)
		}
	}
	a.log.Info("running probes", "checks", names(plan), "user", user, "force", req.Force)
	for _, p := range plan {
		res, err := a.cfg.Runner.Run(ctx, p.name, p.params)
		var limited *probe.LimitError
		switch {
		case errors.As(err, &limited):
			return a.tooMany(limited.Limit, limited.RetryAfter, "check %s: %v", p.name, err)
		case err != nil: // validated above; only a registry change could get here
			return errorf(http.StatusBadRequest, "%v", err)
		}
		a.logResult(res, user)
		if a.cfg.Verdicts != nil {
			a.cfg.Verdicts.Report(res, req.Trigger)
		}
		resp.Results = append(resp.Results, res)
	}
	resp.Results = inOrder(resp.Results, req.Checks)
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// plan validates every check and its parameters, and holds them to the allow-lists,
// so a bad request runs nothing.
func (a *Agent) plan(ctx context.Context, req agentapi.RunRequest) ([]planned, error) {
	reg := a.cfg.Runner.Registry()
	checks := req.Checks
	if len(checks) == 0 {
		checks = reg.DefaultEnabled()
	}
	for name := range req.Params {
		if !contains(checks, name) {
			return nil, fmt.Errorf("parameters given for %q, which is not among the checks %v", name, checks)
		}
	}
	var plan []planned
	var errs []error
	seen := map[string]bool{}
	for _, name := range checks {
		if seen[name] {
			errs = append(errs, fmt.Errorf("check %q named twice", name))
			continue
		}
		seen[name] = true
		spec, ok := reg.Get(name)
		if ok && spec.RunsOn != probe.OnNode {
			errs = append(errs, fmt.Errorf("check %s runs in the controller, not on a node", name))
			continue
		}
		if !ok {
			errs = append(errs, fmt.Errorf("%w %q (this agent runs: %s)", probe.ErrUnknownProbe, name, strings.Join(specNames(reg), ", ")))
			continue
		}
		resolved, err := spec.Params.Resolve(req.Params[name])
		if err == nil {
			err = a.cfg.Allow.Check(ctx, spec.Params, resolved)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("check %s: %w", name, err))
			continue
		}
		plan = append(plan, planned{name: name, params: req.Params[name], invasive: spec.IsInvasive(resolved)})
	}
	return plan, errors.Join(errs...)
}

// startInvasive makes the request the node's one invasive run and places
// ProbingTaint, or says why not; the caller releases the claim and removes the taint.
func (a *Agent) startInvasive(ctx context.Context, what string, force bool) (*probe.Claim, *httpError) {
	claim, e := a.claimInvasive(ctx, what, force)
	if e != nil {
		return nil, e
	}
	if e := a.taint(ctx, what); e != nil {
		claim.Release()
		return nil, e
	}
	return claim, nil
}

// refuse answers each invasive check of plan as refused for why, and returns the
// checks left to run. A refused check also gets a result with status error, so a
// caller that does not read Refused sees no verdict for it, as it saw none when the
// whole request was refused.
func (a *Agent) refuse(resp *agentapi.RunResponse, plan []planned, why *httpError) []planned {
	var run []planned
	for _, p := range plan {
		if !p.invasive {
			run = append(run, p)
			continue
		}
		resp.Refused = append(resp.Refused, agentapi.Refusal{Check: p.name, Code: why.code, Error: why.body.Error, Pods: why.body.Pods})
		resp.Results = append(resp.Results, probe.Result{Node: a.cfg.Node, Check: p.name, Status: probe.StatusError,
			Message: "not run: " + why.body.Error, Started: time.Now()})
	}
	return run
}

// inOrder sorts results in the order of the checks asked for (refused ones come
// first otherwise); with no checks named (the default ones) the order is kept.
func inOrder(results []probe.Result, checks []string) []probe.Result {
	rank := func(r probe.Result) int {
		if i := slices.Index(checks, r.Check); i >= 0 {
			return i
		}
		return len(checks)
	}
	slices.SortStableFunc(results, func(x, y probe.Result) int { return rank(x) - rank(y) })
	return results
}

// claimInvasive makes the request the node's one invasive run, or says why not.
func (a *Agent) claimInvasive(ctx context.Context, what string, force bool) (*probe.Claim, *httpError) {
	// Pods holding the GPUs are asked about before the slot is claimed too: two
	// requests at once on a busy node are then both refused for the pods, which a
	// caller waits out, not one of them for the other's claim, which it cannot tell
	// from a running stress test.
	if !force {
		if e := a.gpuHolders(ctx, what); e != nil {
			return nil, e
		}
	}
	// The runner holds the one invasive slot; the agent only turns a refusal into 409.
	claim, err := a.cfg.Runner.ClaimInvasive(what)
	if err != nil {
		return nil, errorf(http.StatusConflict, "%v", err)
	}
	if force {
		return claim, nil
	}
	// Asked again under the claim: a pod may have started in between.
	if e := a.gpuHolders(ctx, what); e != nil {
		claim.Release()
		return nil, e
	}
	return claim, nil
}

// gpuHolders refuses an invasive probe while pods hold the node's GPUs (their names
// in the answer), or while it cannot tell.
func (a *Agent) gpuHolders(ctx context.Context, what string) *httpError {
	if a.cfg.GPUPods == nil {
		return errorf(http.StatusConflict, "invasive probe %s: cannot tell whether pods on %s hold GPUs; set force to run anyway", what, a.cfg.Node)
	}
	pods, err := a.cfg.GPUPods(ctx)
	if err != nil {
		return errorf(http.StatusServiceUnavailable, "invasive probe %s: %v", what, err)
	}
	if len(pods) > 0 {
		e := errorf(http.StatusConflict, "invasive probe %s refused: %d pod(s) on %s hold GPUs: %s (drain the node, or set force)",
			what, len(pods), a.cfg.Node, strings.Join(pods, "; "))
		e.body.Pods = pods
		return e
	}
	return nil
}

// taint places ProbingTaint before an invasive probe; without it the probe does
// not run.
func (a *Agent) taint(ctx context.Context, what string) *httpError {
	if a.cfg.Nodes == nil {
		return errorf(http.StatusServiceUnavailable, "invasive probe %s: this agent cannot taint %s (no Kubernetes client)", what, a.cfg.Node)
	}
	if err := setProbingTaint(ctx, a.cfg.Nodes, a.cfg.Node, true); err != nil {
		a.untaint(ctx) // an update that went through but whose answer was lost
		return errorf(http.StatusServiceUnavailable, "invasive probe %s: %v", what, err)
	}
	return nil
}

// untaint removes ProbingTaint after an invasive probe, even when the caller has
// gone (its context is done); a failure is logged, and the next invasive run or the
// agent's restart removes the taint.
func (a *Agent) untaint(ctx context.Context) {
	if err := setProbingTaint(context.WithoutCancel(ctx), a.cfg.Nodes, a.cfg.Node, false); err != nil {
		a.log.Error("probing taint left on the node", "err", err)
	}
}

// logResult writes one line per result: the agent's log goes to Loki with every other
// pod log, so probe history is queryable there too.
func (a *Agent) logResult(res probe.Result, user string) {
	attrs := []any{"check", res.Check, "status", res.Status, "duration", res.Duration.Round(time.Millisecond).String(), "user", user}
	if res.Message != "" {
		attrs = append(attrs, "message", res.Message)
	}
	for _, d := range res.Devices {
		for k, v := range d.Values {
			attrs = append(attrs, "device_"+d.ID+"_"+k, v)
		}
	}
	for k, v := range res.Values {
		attrs = append(attrs, k, v)
	}
	level := slog.LevelInfo
	if res.Status == probe.StatusFail || res.Status == probe.StatusError {
		level = slog.LevelWarn
	}
	a.log.Log(context.Background(), level, "probe result", attrs...)
}

// Close stops what the probes left running (iperf3 servers still waiting for a
// client).
func (a *Agent) Close() { a.cfg.Runner.Close() }

func names(plan []planned) []string {
	out := make([]string, len(plan))
	for i, p := range plan {
		out[i] = p.name
	}
	return out
}

func specNames(reg *probe.Registry) []string {
	var out []string
	for _, s := range reg.List() {
		out = append(out, s.Name)
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

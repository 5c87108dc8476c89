// Package statusapi serves IBM Autopilot's GET /status on a TLS listener of its own.
// Each request becomes a ProbeRun created with the caller's own bearer token: the
// API server authenticates it, authorizes it by RBAC on proberuns (and the force
// policy), and audits it as the caller; the controller checks nothing itself and
// lends the caller none of its own rights. The handler then watches the run, which
// the leader runs like any other, and answers when it is done, as Autopilot did.
package statusapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/trigger"
)

// Defaults of the limits on /status.
const (
	// DefaultRunsPerSecond and DefaultBurst bound the ProbeRuns /status creates.
	DefaultRunsPerSecond = 20
	DefaultBurst         = 40
	// DefaultMaxWaiting bounds the requests that wait for their run at once: as
	// many as the leader runs manual runs at a time.
	DefaultMaxWaiting = trigger.MaxManualRuns
	// MaxHeaderBytes bounds a request's line and headers (the query names the
	// checks and nodes); a body is never read.
	MaxHeaderBytes = 64 << 10
)

// busyRetry is the Retry-After of a request refused because others wait.
const busyRetry = 5 * time.Second

// Config configures a Server.
type Config struct {
	// APIServer is how to reach the API server (its address and CA); only these
	// are used: each request's client carries the caller's token and nothing else.
	APIServer *rest.Config
	// Runs reads the runs, with the controller's own client (list, watch proberuns).
	Runs rest.Interface
	// Nodes lists the nodes a request without host= or nodelabel= probes.
	Nodes func() ([]string, error)
	// DefaultChecks run when a request names none.
	DefaultChecks []string
	// RunsPerSecond and Burst bound the runs created (0: the defaults); MaxWaiting
	// the requests waiting for theirs. Past them a request gets 429 and Retry-After.
	RunsPerSecond float64
	Burst         int
	MaxWaiting    int
	// Refused counts the requests refused with 429, by reason (rate, waiting);
	// nil: not counted.
	Refused *prometheus.CounterVec
	Log     *slog.Logger
}

// Server serves GET /status.
type Server struct {
	cfg     Config
	limiter *rate.Limiter
	waiting chan struct{}
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.APIServer == nil || cfg.Runs == nil || cfg.Nodes == nil {
		return nil, errors.New("statusapi: the API server's address, a client of the runs and the nodes are required")
	}
	if cfg.RunsPerSecond <= 0 {
		cfg.RunsPerSecond = DefaultRunsPerSecond
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = DefaultMaxWaiting
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Server{cfg: cfg, limiter: rate.NewLimiter(rate.Limit(cfg.RunsPerSecond), cfg.Burst),
		waiting: make(chan struct{}, cfg.MaxWaiting)}, nil
}

// Handler serves
//
//	GET /status?check=pciebw,dcgm&host=n1,n2&nodelabel=SELECTOR&batch=N&r=2&format=json
//
// and 404 on every other path. Without check= the default checks run; without host=
// or nodelabel= the probe nodes are probed; r is dcgm's level. It answers when the
// run is done: as text (per node, [[ CHECK ]] SUCCESS|WARNING|FAIL|ERROR|SKIPPED and
// Node Status: Ok|Err), or with format=json the ProbeRun.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", s.status)
	return mux
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token = strings.TrimSpace(token); !ok || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="faultline"`)
		http.Error(w, "a bearer token is required: the run is created in your name", http.StatusUnauthorized)
		return
	}
	pr, code, err := s.spec(r)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	select {
	case s.waiting <- struct{}{}:
		defer func() { <-s.waiting }()
	default:
		s.refuse(w, "waiting", busyRetry, fmt.Sprintf("%d requests are waiting for their runs (at most %d)", cap(s.waiting), cap(s.waiting)))
		return
	}
	now := time.Now()
	if res := s.limiter.ReserveN(now, 1); res.DelayFrom(now) > 0 {
		wait := res.DelayFrom(now)
		res.CancelAt(now)
		s.refuse(w, "rate", wait, "too many runs created per second")
		return
	}
	created, err := s.create(r.Context(), token, pr)
	if err != nil {
		code := http.StatusServiceUnavailable
		var st apierrors.APIStatus
		if errors.As(err, &st) && st.Status().Code >= 400 && st.Status().Code < 500 {
			code = int(st.Status().Code)
		}
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="faultline"`)
		}
		http.Error(w, "create ProbeRun: "+err.Error(), code)
		return
	}
	s.cfg.Log.Info("probe run created for /status", "run", created.Name, "checks", pr.Spec.Checks, "nodes", len(pr.Spec.Nodes),
		"remote", r.RemoteAddr)
	done, err := s.wait(r.Context(), created)
	if err != nil {
		// The run goes on without the caller: kubectl get proberun NAME.
		http.Error(w, fmt.Sprintf("proberun %s: %v", created.Name, err), http.StatusGatewayTimeout)
		return
	}
	if done.Status.Phase == v1alpha1.ProbeRunRefused {
		reason, msg := refusal(done)
		http.Error(w, fmt.Sprintf("proberun %s refused: %s: %s", done.Name, reason, msg), refusedStatus(reason))
		return
	}
	if r.URL.Query().Get("format") == "json" {
		done.APIVersion, done.Kind = v1alpha1.SchemeGroupVersion.String(), "ProbeRun"
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(done)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	WriteText(w, done)
}

// spec is the ProbeRun a request asks for, or the status of its error.
func (s *Server) spec(r *http.Request) (*v1alpha1.ProbeRun, int, error) {
	q := r.URL.Query()
	pr := &v1alpha1.ProbeRun{ObjectMeta: metav1.ObjectMeta{GenerateName: "status-"},
		Spec: v1alpha1.ProbeRunSpec{Checks: splitList(q.Get("check")), Nodes: splitList(q.Get("host")),
			Trigger: "manual", Reason: "GET /status"}}
	if len(pr.Spec.Checks) == 0 {
		pr.Spec.Checks = s.cfg.DefaultChecks
	}
	if sel := q.Get("nodelabel"); sel != "" {
		if len(pr.Spec.Nodes) > 0 {
			return nil, http.StatusBadRequest, errors.New("give host or nodelabel, not both")
		}
		ls, err := metav1.ParseToLabelSelector(sel)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("nodelabel: %w", err)
		}
		pr.Spec.NodeSelector = ls
	}
	if b := q.Get("batch"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 || n > trigger.MaxBatch {
			return nil, http.StatusBadRequest, fmt.Errorf("batch: want a number from 1 to %d", trigger.MaxBatch)
		}
		pr.Spec.Batch = int32(n)
	}
	if lvl := q.Get("r"); lvl != "" {
		pr.Spec.Params = map[string]map[string]string{"dcgm": {"level": lvl}}
	}
	if len(pr.Spec.Nodes) == 0 && pr.Spec.NodeSelector == nil {
		nodes, err := s.cfg.Nodes()
		if err != nil {
			return nil, http.StatusServiceUnavailable, err
		}
		if len(nodes) == 0 {
			return nil, http.StatusServiceUnavailable, errors.New("no probe nodes known yet")
		}
		pr.Spec.Nodes = nodes
	}
	return pr, 0, nil
}

// create creates the run with the caller's token alone: rest.AnonymousClientConfig
// keeps the API server's address and CA and drops the controller's credentials.
func (s *Server) create(ctx context.Context, token string, pr *v1alpha1.ProbeRun) (*v1alpha1.ProbeRun, error) {
	rc := rest.AnonymousClientConfig(s.cfg.APIServer)
	rc.BearerToken = token
	client, err := v1alpha1.NewRESTClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	created := &v1alpha1.ProbeRun{}
	return created, client.Post().Resource(v1alpha1.ProbeRunResource).Body(pr).Do(ctx).Into(created)
}

// wait watches the run until it is finished (Completed or Refused).
func (s *Server) wait(ctx context.Context, pr *v1alpha1.ProbeRun) (*v1alpha1.ProbeRun, error) {
	lw := cache.NewListWatchFromClient(s.cfg.Runs, v1alpha1.ProbeRunResource, metav1.NamespaceAll,
		fields.OneTermEqualSelector("metadata.name", pr.Name))
	ev, err := watchtools.UntilWithSync(ctx, lw, &v1alpha1.ProbeRun{}, nil, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			return false, errors.New("deleted before it finished")
		case watch.Added, watch.Modified:
			got, ok := ev.Object.(*v1alpha1.ProbeRun)
			return ok && got.UID == pr.UID && got.Status.Finished(), nil
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return ev.Object.(*v1alpha1.ProbeRun), nil
}

func (s *Server) refuse(w http.ResponseWriter, reason string, retry time.Duration, msg string) {
	if s.cfg.Refused != nil {
		s.cfg.Refused.WithLabelValues(reason).Inc()
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(max((retry+time.Second-1)/time.Second, 1))))
	http.Error(w, msg, http.StatusTooManyRequests)
}

// refusal is the reason and message of a refused run's Accepted condition.
func refusal(pr *v1alpha1.ProbeRun) (string, string) {
	for _, c := range pr.Status.Conditions {
		if c.Type == v1alpha1.ProbeRunAccepted {
			return c.Reason, c.Message
		}
	}
	return "Refused", ""
}

// refusedStatus answers a refused run as /status answered the same refusal.
func refusedStatus(reason string) int {
	switch reason {
	case v1alpha1.ReasonNoProbeAgent:
		return http.StatusConflict
	case v1alpha1.ReasonProbesOff:
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadRequest
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

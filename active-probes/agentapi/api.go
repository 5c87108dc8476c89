package agentapi

import (
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The agent's HTTP API. Every /api/ request carries `Authorization: Bearer <token>`;
// the agent asks the apiserver who the token belongs to (TokenReview) and whether that
// identity may use probes on this node (SubjectAccessReview), see kubeauth.

// GET  /api/v1/checks           the probes this agent runs, with their parameters
// POST /api/v1/run              run checks now and return their results (RunRequest → RunResponse),
// ?trigger=schedule             saying why the run happens (RunRequest.Trigger)
// GET  /healthz, GET /metrics   unauthenticated
const (
	PathChecks = "/api/v1/checks"
	PathRun    = "/api/v1/run"

	// Resource is what callers need access to: probes.faultline.io named after the node.
	Resource = "probes"

	// TokenAudience is the audience of the tokens the chart's agents accept
	// (--token-audience) and the controller's projected token is minted for.
	TokenAudience = "faultline-probe-agent"

	// DefaultPort is where the agent listens in the chart (host network).
	DefaultPort = 9402
)

// RunRequest asks the agent to run checks on its node.
type RunRequest struct {
	// Checks to run, in order; empty runs the probes enabled by default.
	Checks []string `json:"checks,omitempty"`
	// Params per check: {"pciebw": {"min_gbps": "8"}}.
	Params map[string]probe.Params `json:"params,omitempty"`
	// Force runs invasive checks even while containers on the node hold GPU devices.
	Force bool `json:"force,omitempty"`
	// Trigger says why the run happens (manual, schedule, rule, recovery, ...): the
	// agent writes it in each result's verdict line (active-probes/probelines). It
	// travels as the query parameter QueryTrigger, not in the body, so an agent of
	// an earlier version, which refuses unknown body fields, still runs the request.
	Trigger string `json:"-"`
}

// QueryTrigger is the query parameter of POST PathRun that carries RunRequest.Trigger.
const QueryTrigger = "trigger"

// RunResponse carries one result per check, in the requested order.
type RunResponse struct {
	Node    string         `json:"node"`
	Results []probe.Result `json:"results"`
	// Refused lists the checks of a request that mixed invasive and harmless checks
	// and that were not run: the invasive ones, while pods hold the node's GPUs or
	// another invasive check runs there (a request of invasive checks only is
	// refused as a whole, 409). Each also has a result with status error, so a
	// caller that does not read Refused sees no verdict for it.
	Refused []Refusal `json:"refused,omitempty"`
}

// Refusal is one check the agent did not run, and why.
type Refusal struct {
	Check string `json:"check"`
	// Code is the HTTP status the check alone would have been refused with (409,
	// 503), Error the reason.
	Code  int    `json:"code"`
	Error string `json:"error"`
	// Pods holding GPUs, when they are the reason.
	Pods []string `json:"pods,omitempty"`
}

// CheckInfo describes one probe the agent can run.
type CheckInfo struct {
	Name           string `json:"name"`
	Help           string `json:"help"`
	DefaultEnabled bool   `json:"defaultEnabled"`
	Invasive       bool   `json:"invasive"`
	// Peer: the check measures against another node (its "peer" parameter);
	// PeerServer names the check the peer's agent must run first to serve it
	// (iperf3: iperf3-server).
	Peer       bool              `json:"peer,omitempty"`
	PeerServer string            `json:"peerServer,omitempty"`
	Timeout    time.Duration     `json:"timeout"`
	Params     []probe.ParamSpec `json:"params,omitempty"`
}

// ErrorResponse is the body of every non-2xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
	// Pods holding GPUs, when an invasive check was refused because of them.
	Pods []string `json:"pods,omitempty"`
}

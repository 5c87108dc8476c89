package agent

import (
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The agent's HTTP API. Every /api/ request carries `Authorization: Bearer <token>`;
// the agent asks the apiserver who the token belongs to (TokenReview) and whether that
// identity may use probes on this node (SubjectAccessReview), see Authorizer.
//
//	GET  /api/v1/checks           the probes this agent runs, with their parameters
//	POST /api/v1/run              run checks now and return their results (RunRequest → RunResponse)
//	POST /api/v1/iperf3/server    start a one-shot iperf3 server for a peer's client (Iperf3ServerRequest)
//	GET  /healthz, GET /metrics   unauthenticated
const (
	PathChecks       = "/api/v1/checks"
	PathRun          = "/api/v1/run"
	PathIperf3Server = "/api/v1/iperf3/server"

	// DefaultPort is where the agent listens in the chart (host network).
	DefaultPort = 9402
)

// RunRequest asks the agent to run checks on its node.
type RunRequest struct {
	// Checks to run, in order; empty runs the probes enabled by default.
	Checks []string `json:"checks,omitempty"`
	// Params per check: {"pciebw": {"min_gbps": "8"}}.
	Params map[string]probe.Params `json:"params,omitempty"`
	// Force runs invasive checks even while pods on the node hold nvidia.com/gpu.
	Force bool `json:"force,omitempty"`
}

// RunResponse carries one result per check, in the requested order.
type RunResponse struct {
	Node    string         `json:"node"`
	Results []probe.Result `json:"results"`
}

// CheckInfo describes one probe the agent can run.
type CheckInfo struct {
	Name           string `json:"name"`
	Help           string `json:"help"`
	DefaultEnabled bool   `json:"defaultEnabled"`
	Invasive       bool   `json:"invasive"`
	// Peer: the check measures against another node (its "peer" parameter);
	// PeerServer: that peer must first serve it through its own agent (iperf3).
	Peer       bool              `json:"peer,omitempty"`
	PeerServer bool              `json:"peerServer,omitempty"`
	Timeout    time.Duration     `json:"timeout"`
	Params     []probe.ParamSpec `json:"params,omitempty"`
}

// Iperf3ServerRequest asks the agent to start `iperf3 -s -1` for one test.
type Iperf3ServerRequest struct {
	Port int    `json:"port"`
	Bind string `json:"bind,omitempty"`
	// IdleTimeout ends the server if no client came (default 60s, at most 10m).
	IdleTimeout time.Duration `json:"idleTimeout,omitempty"`
}

// Iperf3ServerResponse says where the server listens.
type Iperf3ServerResponse struct {
	Node string `json:"node"`
	Port int    `json:"port"`
}

// ErrorResponse is the body of every non-2xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
	// Pods holding GPUs, when an invasive check was refused because of them.
	Pods []string `json:"pods,omitempty"`
}

package controller

import (
	"net/http"

	"github.com/faultline-dev/faultline/controller/act"
)

// UntaintResponse is what faultline untaint prints, whether it asked for the
// untaint with a request on the NodeFaults or wrote the Node itself.
type UntaintResponse struct {
	Node string `json:"node"`
	// Rule is the rule asked for (pack/rule or a rule id), "*" for all of
	// faultline's faults.
	Rule string `json:"rule"`
	// RemovedTaints are the taints taken off the node, as key=value:effect.
	RemovedTaints []string `json:"removedTaints"`
	// ResolvedFaults are the pack/rule of the fault records resolved.
	ResolvedFaults []string `json:"resolvedFaults"`
}

// NewUntaintResponse says what an untaint (act.Actor.UntaintNode) did.
func NewUntaintResponse(r act.Result) UntaintResponse {
	// Empty lists rather than null, so that scripts can always iterate.
	return UntaintResponse{Node: r.Node, Rule: r.Rule,
		RemovedTaints: append([]string{}, r.Removed...), ResolvedFaults: append([]string{}, r.Cleared...)}
}

// Handler serves the controller's plain-HTTP port (mount /metrics beside it):
//
//	GET  /healthz   the process is alive
//	GET  /readyz    the Node cache is synced; while Loki refuses a query of
//	                this replica's, each one (its LogQL and Loki's answer) follows "ok"
//
// and 404 on every other path. Nothing on this plain-HTTP port takes a bearer token:
// what the controller knows is in the API server (NodeFault records, ProbeRuns, the
// Lease) and in the metrics, and an operator's verdicts are requests on the NodeFault
// objects (spec.request; see requestDesk), all authorized and audited by the API
// server. Autopilot's /status has a TLS listener of its own (controller/statusapi).
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", c.readyz)
	return mux
}

// readyz answers the kubelet's readiness probe. A query Loki refuses does not make
// the replica unready (no restart or other replica can fix a query: the packs
// must change), so it is told after "ok" for people, with the status still 200;
// the metric faultline_loki_query_refused says it to alerts.
func (c *Controller) readyz(w http.ResponseWriter, r *http.Request) {
	if !c.Ready() {
		http.Error(w, "node cache not synced", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	if err := src.Health(); err != nil {
		_, _ = w.Write([]byte(err.Error() + "\n"))
	}
}

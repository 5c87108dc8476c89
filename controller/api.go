package controller

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/kubeauth"
)

// FaultsResponse is the body of GET /api/v1/faults.
type FaultsResponse struct {
	Leader  bool       `json:"leader"`
	Nodes   []NodeView `json:"nodes"`
	Held    []HeldView `json:"held"`
	Storms  []string   `json:"storms"`
	Budget  int        `json:"budgetLeft"`
	Version string     `json:"version,omitempty"`
}

// NodeView is a node's faults with a taint entry, as the API shows them.
type NodeView struct {
	Node     string      `json:"node"`
	OptedOut bool        `json:"optedOut,omitempty"`
	Faults   []FaultView `json:"faults"`
}

// FaultView is what a fault's NodeFault record says, as the API shows it.
type FaultView struct {
	Rule     string            `json:"rule"`
	Pack     string            `json:"pack"`
	Severity string            `json:"severity"`
	Action   string            `json:"action"`
	Taint    string            `json:"taint,omitempty"` // key=value:effect
	Captures map[string]string `json:"captures,omitempty"`
	Count    int               `json:"count"`
	// Time is when the fault was last seen (v1alpha1.NodeFaultStatus.Seen).
	Time  time.Time               `json:"time"`
	Lines []v1alpha1.EvidenceLine `json:"lines"`
	// Recover is the rule's recovery policy, as text ("manual", "after 24h", ...).
	Recover string `json:"recover"`
	// BootID is the node's boot id when the fault was recorded (for recover: reboot).
	BootID string `json:"bootID,omitempty"`
	// TaintPlaced is true when the record says faultline placed the taint (or is
	// placing it); false when an equal or same-key taint was already there.
	TaintPlaced bool `json:"taintPlaced,omitempty"`
}

func nodeView(nf act.NodeFaults) NodeView {
	v := NodeView{Node: nf.Node, OptedOut: nf.OptedOut, Faults: make([]FaultView, len(nf.Faults))}
	for i, rec := range nf.Faults {
		st := &rec.Status
		f := FaultView{Rule: rec.Spec.Rule, Pack: rec.Spec.Pack, Severity: rec.Spec.Severity, Action: rec.Spec.Action,
			Taint: rec.Spec.Taint, Captures: st.Captures, Count: int(st.Count), Time: st.Seen(), Lines: st.Evidence,
			Recover: st.Recover, BootID: st.BootID, TaintPlaced: st.OwnsTaint()}
		if st.Taint != nil {
			f.Taint = st.Taint.Taint
		}
		v.Faults[i] = f
	}
	return v
}

// UntaintResponse is the body of POST /api/v1/nodes/{node}/untaint, and what
// faultline untaint prints, whether it asked the API or wrote the Node itself.
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

// HeldView is a held fault as the API shows it.
type HeldView struct {
	Node    string    `json:"node"`
	Rule    string    `json:"rule"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
	Hits    int       `json:"hits"`
}

// Handler serves the controller's HTTP API (mount /metrics beside it). Every
// endpoint but /healthz and /readyz needs a Kubernetes bearer token whose identity
// may perform the action on the faultline.io resource named on the right (see
// Config.Auth; docs/security.md lists the ClusterRoles that grant them):
//
//	GET  /healthz                          the process is alive
//	GET  /readyz                           the Node cache is synced
//	GET  /api/v1/faults                    active faults per node, held faults, storms, budget   get faults
//	GET  /api/v1/loki/health               503 while Loki refuses a query                        get faults
//	probe endpoints: see trigger.Triggers.Register
//
// An operator's verdicts (resolve a fault, release or dismiss a fleet fault, end a
// storm) are requests on the NodeFault objects (spec.request; see answerRequests),
// authorized and audited by the API server.
func (c *Controller) Handler() http.Handler {
	outer := http.NewServeMux()
	mux := kubeauth.NewMux(outer, c.cfg.Auth, c.log)
	outer.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	outer.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !c.Ready() {
			http.Error(w, "node cache not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /api/v1/faults", kubeauth.Fixed(actReadFaults), func(w http.ResponseWriter, r *http.Request) {
		nodes, err := c.actor.ListActive()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		resp := FaultsResponse{Leader: c.Leading(), Nodes: make([]NodeView, len(nodes)), Storms: c.decider.Storms().Active()}
		for i, nf := range nodes {
			resp.Nodes[i] = nodeView(nf)
		}
		for _, h := range c.decider.Held() {
			resp.Held = append(resp.Held, HeldView{Node: h.Fault.Node, Rule: h.Fault.Rule.String(), Reason: string(h.Reason),
				Message: h.Message, Since: h.Since, Hits: h.Hits})
		}
		if facts, err := c.actor.Facts(); err == nil {
			resp.Budget = c.decider.Taints().Left(facts)
		}
		writeJSON(w, http.StatusOK, resp)
	})
	c.triggers.Register(mux)
	lokiHandlers(mux, func() *lokisource.Source {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.src
	})
	return outer
}

// actReadFaults is the permission to read faults and Loki's health.
var actReadFaults = kubeauth.Action{Verb: "get", Resource: "faults"}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

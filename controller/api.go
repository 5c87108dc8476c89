package controller

import (
	"encoding/json"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/faultline-dev/faultline/controller/act"
)

// FaultsResponse is the body of GET /api/v1/faults.
type FaultsResponse struct {
	Leader  bool             `json:"leader"`
	Nodes   []act.NodeFaults `json:"nodes"`
	Held    []HeldView       `json:"held"`
	Storms  []string         `json:"storms"`
	Budget  int              `json:"budgetLeft"`
	Version string           `json:"version,omitempty"`
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

// Handler serves the controller's HTTP API (mount /metrics beside it):
//
//	GET  /healthz                          the process is alive
//	GET  /readyz                           the Node cache is synced
//	GET  /api/v1/faults                    active faults per node, held faults, storms, budget
//	POST /api/v1/nodes/{node}/untaint      remove faultline's taints (?rule=pack/id for one)
//	GET  /api/v1/loki/health               503 while Loki refuses a query
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !c.Ready() {
			http.Error(w, "node cache not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /api/v1/faults", func(w http.ResponseWriter, r *http.Request) {
		nodes, err := c.actor.ListActive()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		resp := FaultsResponse{Leader: c.Leading(), Nodes: nodes, Storms: c.decider.StormActive()}
		if resp.Nodes == nil {
			resp.Nodes = []act.NodeFaults{}
		}
		for _, h := range c.decider.Held() {
			resp.Held = append(resp.Held, HeldView{Node: h.Fault.Node, Rule: h.Fault.Rule.String(), Reason: string(h.Reason),
				Message: h.Message, Since: h.Since, Hits: h.Hits})
		}
		if facts, err := c.facts(); err == nil {
			resp.Budget = c.decider.BudgetLeft(facts)
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("POST /api/v1/nodes/{node}/untaint", func(w http.ResponseWriter, r *http.Request) {
		res, err := c.Untaint(r.Context(), r.PathValue("node"), r.URL.Query().Get("rule"))
		if err != nil {
			code := http.StatusInternalServerError
			if apierrors.IsNotFound(err) {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	c.triggers.Register(mux)
	c.lokiHandlers(mux)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

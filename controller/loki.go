package controller

import (
	"net/http"

	"github.com/faultline-dev/faultline/kubeauth"
)

// currentBootID is the Node's current boot ID for the Loki source's earlier-boot
// filter; "" (no filtering) while the Node is unknown or the cache not synced.
func (c *Controller) currentBootID(node string) string {
	id, err := c.actor.BootID(node)
	if err != nil {
		return ""
	}
	return id
}

// lokiHandlers serves GET /api/v1/loki/health: 503 with each refused query (its
// LogQL and Loki's answer) while Loki refuses one, 200 otherwise. Not the liveness
// probe: restarting the controller cannot fix a query.
func (c *Controller) lokiHandlers(mux *kubeauth.Mux) {
	mux.HandleFunc("GET /api/v1/loki/health", kubeauth.Fixed(actReadFaults), func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		src := c.src
		c.mu.Unlock()
		if src == nil {
			_, _ = w.Write([]byte("not leading\n"))
			return
		}
		if err := src.Health(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

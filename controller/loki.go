package controller

import (
	"net/http"

	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/kubeauth"
)

// lokiHandlers serves GET /api/v1/loki/health: 503 with each refused query (its
// LogQL and Loki's answer) while Loki refuses one, 200 otherwise. Not the liveness
// probe: restarting the controller cannot fix a query.
func lokiHandlers(mux *kubeauth.Mux, source func() *lokisource.Source) {
	mux.HandleFunc("GET /api/v1/loki/health", kubeauth.Fixed(actReadFaults), func(w http.ResponseWriter, r *http.Request) {
		src := source()
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

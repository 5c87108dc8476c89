package controller

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The plain-HTTP port has no handler that takes a bearer token: with an operator's
// token or without, every path but /healthz and /readyz is not found (/metrics is
// mounted beside it by the binary).
func TestPlainPortTakesNoToken(t *testing.T) {
	h := (&Controller{}).Handler()
	for _, path := range []string{"/status", "/status?check=nvml&host=gpu-1", "/api/v1/faults", "/api/v1/loki/health",
		"/api/v1/probes", "/api/v1/nodes/gpu-1/untaint", "/api/v1/storms/p/r/release", "/", "/anything"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			for _, token := range []string{"", "some-operator-token"} {
				req := httptest.NewRequest(method, path, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusNotFound {
					t.Errorf("%s %s (token %v): %d, want 404", method, path, token != "", w.Code)
				}
			}
		}
	}
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusServiceUnavailable} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != want {
			t.Errorf("GET %s: %d, want %d (no Node cache synced)", path, w.Code, want)
		}
	}
}

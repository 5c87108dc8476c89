package statusapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// Requests refused before any run is created: no token, a query that cannot be a
// ProbeRun; and other paths are not found. (Runs themselves: the controller's
// TestStatusInCallersName, TestManualProbes, against the real apiserver.)
func TestRefusedBeforeCreate(t *testing.T) {
	created := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		created++
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer api.Close()
	runs, err := v1alpha1.NewRESTClientForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{APIServer: &rest.Config{Host: api.URL}, Runs: runs, Nodes: func() ([]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	for _, tc := range []struct {
		path, token string
		want        int
		says        string
	}{
		{"/status?host=gpu-1", "", http.StatusUnauthorized, "bearer token"},
		{"/status?host=gpu-1&nodelabel=a=b", "t", http.StatusBadRequest, "not both"},
		{"/status?host=gpu-1&batch=51", "t", http.StatusBadRequest, "batch"},
		{"/status?host=gpu-1&batch=x", "t", http.StatusBadRequest, "batch"},
		{"/status?nodelabel=a%20in", "t", http.StatusBadRequest, "nodelabel"},
		{"/status", "t", http.StatusServiceUnavailable, "no probe nodes"},
		{"/api/v1/faults", "t", http.StatusNotFound, ""},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.says) {
			t.Errorf("GET %s: %d %q, want %d saying %q", tc.path, w.Code, w.Body.String(), tc.want, tc.says)
		}
	}
	if created != 0 {
		t.Errorf("%d requests reached the API server", created)
	}
	// The API server's answer to the create decides: here a 500, passed on as 503.
	req := httptest.NewRequest(http.MethodGet, "/status?host=gpu-1", nil)
	req.Header.Set("Authorization", "Bearer t")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || created == 0 {
		t.Errorf("an API server that fails: %d after %d requests, want 503", w.Code, created)
	}
}

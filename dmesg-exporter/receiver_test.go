package exporter_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
)

// newFakeReceiver serves Loki's push endpoint, decodes each request and answers with
// the status handle returns. It stands in only where a test needs to script the
// receiver's answers (the real Loki serves every other test).
func newFakeReceiver(t *testing.T, handle func(lines []string) int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		raw, err := snappy.Decode(nil, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req push.PushRequest
		if err := req.Unmarshal(raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var lines []string
		for _, s := range req.Streams {
			for _, e := range s.Entries {
				lines = append(lines, e.Line)
			}
		}
		w.WriteHeader(handle(lines))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

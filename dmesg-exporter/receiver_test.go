package exporter_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"

	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
)

// pushed is one request as a scripted receiver saw it.
type pushed struct {
	Lines  []string
	Source []string // the source of each line's stream (ship.SourceKernel, ship.SourcePod)
	Bytes  int      // the request body's size on the wire (snappy-compressed)
}

// kernelLines returns the lines of kernel streams.
func (p pushed) kernelLines() []string {
	var out []string
	for i, l := range p.Lines {
		if p.Source[i] == ship.SourceKernel {
			out = append(out, l)
		}
	}
	return out
}

// newFakeReceiver serves Loki's push endpoint, decodes each request and answers with
// the status handle returns. It stands in only where a test needs to script the
// receiver's answers (the real Loki serves every other test).
func newFakeReceiver(t testing.TB, handle func(p pushed) int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
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
		p := pushed{Bytes: len(body)}
		for _, s := range req.Streams {
			src := ship.SourcePod
			if strings.Contains(s.Labels, `source="kernel"`) {
				src = ship.SourceKernel
			}
			for _, e := range s.Entries {
				p.Lines = append(p.Lines, e.Line)
				p.Source = append(p.Source, src)
			}
		}
		w.WriteHeader(handle(p))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

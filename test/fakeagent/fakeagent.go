// Package fakeagent serves the probe agent's API shape over TLS, for the tests of
// its clients: it answers a check list and a passing nvml run, and records the
// bearer token of every request, so a test can tell which requests reached it.
package fakeagent

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// Agent is a served fake agent.
type Agent struct {
	// URL is where it serves: https://127.0.0.1:port.
	URL    string
	mu     sync.Mutex
	tokens []string
}

// Tokens returns the bearer tokens of the requests it received, in order.
func (a *Agent) Tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.tokens...)
}

// Serve serves a fake agent on a loopback port with conf, as the probe-agent
// command serves, until the test ends. Refused handshakes are what such tests
// expect: the server logs none.
func Serve(t testing.TB, conf *tls.Config) *Agent {
	t.Helper()
	a := &Agent{}
	record := func(r *http.Request) {
		a.mu.Lock()
		a.tokens = append(a.tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		a.mu.Unlock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+agentapi.PathChecks, func(w http.ResponseWriter, r *http.Request) {
		record(r)
		_ = json.NewEncoder(w).Encode([]agentapi.CheckInfo{{Name: "nvml"}})
	})
	mux.HandleFunc("POST "+agentapi.PathRun, func(w http.ResponseWriter, r *http.Request) {
		record(r)
		_ = json.NewEncoder(w).Encode(agentapi.RunResponse{Node: "gpu-a", Results: []probe.Result{{Check: "nvml", Status: probe.StatusPass}}})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(tls.NewListener(ln, conf))
	t.Cleanup(func() { _ = srv.Close() })
	a.URL = "https://" + ln.Addr().String()
	return a
}

package proberun

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/testenv"
)

// agentName is the name on the agents' certificate (the chart: their Service's DNS name).
const agentName = "faultline-probe-agent.faultline.svc"

// tlsAgent serves the agent's API shape over TLS (the agent's own ServerTLS) on
// 127.0.0.1 and records the bearer tokens that reached it.
type tlsAgent struct {
	url    string
	mu     sync.Mutex
	tokens []string
}

func (a *tlsAgent) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.tokens...)
}

func startTLSAgent(t *testing.T, p testenv.TLSFiles) *tlsAgent {
	t.Helper()
	conf, err := agent.ServerTLS(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	a := &tlsAgent{}
	mux := http.NewServeMux()
	record := func(r *http.Request) {
		a.mu.Lock()
		a.tokens = append(a.tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		a.mu.Unlock()
	}
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
	// As the probe-agent command serves: a TLS listener with the agent's configuration.
	// Refused handshakes are what the test expects: no server log for them.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(tls.NewListener(ln, conf))
	t.Cleanup(func() { _ = srv.Close() })
	a.url = "https://" + ln.Addr().String()
	return a
}

// runOn runs nvml on gpu-a through the dispatcher with client and returns the node's part.
func runOn(t *testing.T, url string, client *http.Client) NodeRun {
	t.Helper()
	d, err := New(Config{Agents: AgentResolver{Static: map[string]string{"gpu-a": url}}, HTTP: client,
		Token: func() (string, error) { return "secret-token", nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := d.Start(ctx, Request{Nodes: []string{"gpu-a"}, Checks: []string{"nvml"}})
	if err != nil {
		t.Fatal(err)
	}
	if run, err = d.Wait(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	return run.Nodes[0]
}

// The controller's agent client sends its token only to an agent whose certificate
// the configured CA signed for the configured name.
func TestAgentClientTLS(t *testing.T) {
	dir := t.TempDir()
	good := testenv.WriteTLS(t, filepath.Join(dir, "good"), agentName)
	rogue := testenv.WriteTLS(t, filepath.Join(dir, "rogue"), agentName)

	client, err := AgentClient(good.CA, agentName)
	if err != nil {
		t.Fatal(err)
	}
	// The right agent: verified, the token arrives, the result comes back.
	right := startTLSAgent(t, good)
	nr := runOn(t, right.url, client)
	if nr.Error != "" || nr.Status != probe.StatusPass || len(nr.Results) != 1 {
		t.Fatalf("agent with the CA's certificate: %+v", nr)
	}
	if got := right.seen(); len(got) != 2 || got[0] != "secret-token" || got[1] != "secret-token" {
		t.Errorf("tokens the agent received: %q, want the token on both calls", got)
	}

	// A certificate for the right name from another CA: refused before any
	// request, so the token never leaves.
	rogueAgent := startTLSAgent(t, rogue)
	nr = runOn(t, rogueAgent.url, client)
	if nr.Status != probe.StatusError || !strings.Contains(nr.Error, "certificate signed by unknown authority") {
		t.Errorf("agent with another CA's certificate: %+v, want a certificate error", nr)
	}
	if got := rogueAgent.seen(); len(got) != 0 {
		t.Errorf("the rogue agent received tokens %q", got)
	}
	// The right CA, the wrong expected name: refused too.
	misnamed, err := AgentClient(good.CA, "someone-else.faultline.svc")
	if err != nil {
		t.Fatal(err)
	}
	before := len(right.seen())
	nr = runOn(t, right.url, misnamed)
	if nr.Status != probe.StatusError || !strings.Contains(nr.Error, "certificate is valid for "+agentName) {
		t.Errorf("another expected name: %+v, want a name mismatch", nr)
	}
	if got := right.seen(); len(got) != before {
		t.Errorf("the name mismatch still sent tokens: %q", got[before:])
	}
	// Plain HTTP clients get no answer from the TLS listener.
	resp, err := http.Get(strings.Replace(right.url, "https", "http", 1) + agentapi.PathChecks)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS agent: %s", resp.Status)
		}
	}

	// Bad CA files are clear errors.
	if _, err := AgentClient(filepath.Join(dir, "missing.crt"), agentName); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing CA file: %v", err)
	}
	if _, err := AgentClient(good.Key, agentName); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key as CA file: %v", err)
	}
}

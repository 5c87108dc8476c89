package proberun

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/test/fakeagent"
	"github.com/faultline-dev/faultline/test/testenv"
)

// agentName is the name on the agents' certificate (the chart: their Service's DNS name).
const agentName = "faultline-probe-agent.faultline.svc"

// startTLSAgent serves the agent's API shape over TLS with the agent's own
// ServerTLS on the certificate and key of p.
func startTLSAgent(t *testing.T, p testenv.TLSFiles) *fakeagent.Agent {
	t.Helper()
	conf, err := agent.ServerTLS(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return fakeagent.Serve(t, conf)
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
	nr := runOn(t, right.URL, client)
	if nr.Error != "" || nr.Status != probe.StatusPass || len(nr.Results) != 1 {
		t.Fatalf("agent with the CA's certificate: %+v", nr)
	}
	if got := right.Tokens(); len(got) != 2 || got[0] != "secret-token" || got[1] != "secret-token" {
		t.Errorf("tokens the agent received: %q, want the token on both calls", got)
	}

	// A certificate for the right name from another CA: refused before any
	// request, so the token never leaves.
	rogueAgent := startTLSAgent(t, rogue)
	nr = runOn(t, rogueAgent.URL, client)
	if nr.Status != probe.StatusError || !strings.Contains(nr.Error, "certificate signed by unknown authority") {
		t.Errorf("agent with another CA's certificate: %+v, want a certificate error", nr)
	}
	if got := rogueAgent.Tokens(); len(got) != 0 {
		t.Errorf("the rogue agent received tokens %q", got)
	}
	// The right CA, the wrong expected name: refused too.
	misnamed, err := AgentClient(good.CA, "someone-else.faultline.svc")
	if err != nil {
		t.Fatal(err)
	}
	before := len(right.Tokens())
	nr = runOn(t, right.URL, misnamed)
	if nr.Status != probe.StatusError || !strings.Contains(nr.Error, "certificate is valid for "+agentName) {
		t.Errorf("another expected name: %+v, want a name mismatch", nr)
	}
	if got := right.Tokens(); len(got) != before {
		t.Errorf("the name mismatch still sent tokens: %q", got[before:])
	}
	// Plain HTTP clients get no answer from the TLS listener.
	resp, err := http.Get(strings.Replace(right.URL, "https", "http", 1) + agentapi.PathChecks)
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

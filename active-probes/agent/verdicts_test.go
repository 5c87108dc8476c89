package agent_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// verdictLog records what the agent reports.
type verdictLog struct {
	mu   sync.Mutex
	seen []string // check/status/trigger
}

func (v *verdictLog) Report(res probe.Result, trigger string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen = append(v.seen, res.Check+"/"+string(res.Status)+"/"+trigger)
}

func (v *verdictLog) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.seen...)
}

// TestVerdictsCarryTheTrigger: every result the agent answers with is reported with
// the trigger the caller named in the query (none when it named none), and a
// trigger that is no lower-case word is refused before anything runs.
func TestVerdictsCarryTheTrigger(t *testing.T) {
	f := setup(t, nil)
	log := &verdictLog{}
	var runs atomic.Int32
	_, url := serveAgentWith(t, f.asAgent, testRegistry(t, &runs, nil), agentOptions{kubelet: f.kubelet.Socket, verdicts: log})
	c := &agentapi.Client{BaseURL: url, Token: func() (string, error) { return f.tokens["controller"], nil }}
	ctx := context.Background()
	if _, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"quick"}, Trigger: "schedule"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"quick"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{"quick"}, Trigger: "Schedule; rm"})
	wantCode(t, "a trigger that is no word", err, http.StatusBadRequest)
	if got, want := log.all(), []string{"quick/pass/schedule", "quick/pass/"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("reported %q, want %q", got, want)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs, want 2 (the refused request runs nothing)", n)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestProbeAgentLineFlags: the flags of the agent's lines are checked before the
// agent connects to anything, with a message that says what is missing.
func TestProbeAgentLineFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nvml-events"}, "set exactly one of --events-otlp-endpoint and --events-loki-url"},
		{[]string{"--nvml-events", "--events-otlp-endpoint=http://127.0.0.1:1", "--events-loki-url=http://127.0.0.1:2"}, "set at most one of"},
		{[]string{"--events-otlp-endpoint=http://127.0.0.1:1", "--events-loki-url=http://127.0.0.1:2"}, "set at most one of"},
		{[]string{"--events-otlp-endpoint=http://127.0.0.1:1", "--verdict-lines=false"}, "need --nvml-events or --verdict-lines"},
	} {
		_, err := run(t, append([]string{"--node=gpu-1", "--kubeconfig=/nonexistent"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// run runs the agent's command with args and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRoot()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

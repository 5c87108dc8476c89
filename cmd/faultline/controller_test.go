package main

import (
	"strings"
	"testing"
)

// The client's rate limits are checked before anything is started: a zero limit would
// make client-go fall back to its own 5 requests/s without a word.
func TestControllerRejectsNonPositiveAPILimits(t *testing.T) {
	for _, args := range [][]string{
		{"--kube-api-qps", "0"},
		{"--kube-api-qps", "-1"},
		{"--kube-api-burst", "0"},
	} {
		_, err := run(t, "", append([]string{"controller", "--loki-url", "http://127.0.0.1:1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("%v: err = %v, want the limits rejected", args, err)
		}
	}
}

// --act-workers out of range is refused before anything is started, naming the flag.
func TestControllerRejectsBadActWorkers(t *testing.T) {
	for _, n := range []string{"0", "-1", "1025"} {
		_, err := run(t, "", "controller", "--loki-url", "http://127.0.0.1:1", "--act-workers", n)
		if err == nil || !strings.Contains(err.Error(), "--act-workers") {
			t.Errorf("--act-workers %s: err = %v, want it rejected", n, err)
		}
	}
}

// A bad --max-mode is refused before anything is started, naming the flag.
func TestControllerRejectsBadMaxMode(t *testing.T) {
	_, err := run(t, "", "controller", "--loki-url", "http://127.0.0.1:1", "--max-mode", "enforcing")
	if err == nil || !strings.Contains(err.Error(), "--max-mode") || !strings.Contains(err.Error(), "observe") {
		t.Errorf("err = %v, want --max-mode rejected with the modes", err)
	}
}

// A bad fleet flag is refused before anything is started, naming the flag and the
// value.
func TestControllerRejectsBadFleetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fleet-min-nodes", "1"}, "--fleet-min-nodes 1: must be at least 2"},
		{[]string{"--fleet-min-share", "0"}, "--fleet-min-share 0: must be in (0, 1]"},
		{[]string{"--fleet-window", "0s"}, "--fleet-window 0s: must be positive"},
		{[]string{"--fleet-group-budget", "101"}, "--fleet-group-budget 101: must be 0"},
		{[]string{"--fleet-label", ""}, `--fleet-label "": not a label key`},
	} {
		_, err := run(t, "", append([]string{"controller", "--loki-url", "http://127.0.0.1:1"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// A bad --log-level is refused before anything is started, naming the flag.
func TestControllerRejectsBadLogLevel(t *testing.T) {
	_, err := run(t, "", "controller", "--loki-url", "http://127.0.0.1:1", "--log-level", "verbose")
	if err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("err = %v, want --log-level rejected", err)
	}
}

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/proberun"
)

// fakeProbeAPI answers POST /api/v1/probes as the controller does once a run is
// done: one nvml result on gpu-1 with the given expected GPU count. It returns the
// controller's URL and a kubeconfig whose credentials the CLI sends.
func fakeProbeAPI(t *testing.T, expected float64) (string, string) {
	t.Helper()
	res := probe.Result{Node: "gpu-1", Check: "nvml", Status: probe.StatusPass, Duration: 120 * time.Millisecond,
		Values: map[string]float64{"gpu_count": 8, "gpus_expected": expected}}
	r := proberun.Run{ID: "r1", Trigger: "manual", Checks: []string{"nvml"}, State: proberun.StateDone, Status: probe.StatusPass,
		Nodes: []proberun.NodeRun{{Node: "gpu-1", State: proberun.StateDone, Status: probe.StatusPass, Results: []probe.Result{res}}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/api/v1/probes" {
			http.NotFound(w, req)
			return
		}
		_ = json.NewEncoder(w).Encode(r)
	}))
	t.Cleanup(srv.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, kc
}

// An expected GPU count of 0 turns the count's comparison off: the table says
// "not checked", never a bare 0; a count that was compared is shown as it is.
func TestProbeRunNotChecked(t *testing.T) {
	for _, tc := range []struct {
		expected  float64
		want, not string
	}{
		{0, "gpus_expected=not checked", "gpus_expected=0"},
		{8, "gpus_expected=8", "not checked"},
	} {
		api, kc := fakeProbeAPI(t, tc.expected)
		out, err := run(t, "", "probe", "run", "--node", "gpu-1", "--check", "nvml", "--wait", "--controller", api, "--kubeconfig", kc)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, tc.want) || strings.Contains(out, tc.not) {
			t.Errorf("expected %v: want %q and no %q in\n%s", tc.expected, tc.want, tc.not, out)
		}
	}
}

// -o json and -o yaml give the run itself, the same object.
func TestProbeRunStructuredOutput(t *testing.T) {
	api, kc := fakeProbeAPI(t, 0)
	var runs [2]proberun.Run
	for i, o := range []string{"json", "yaml"} {
		out, err := run(t, "", "probe", "run", "--node", "gpu-1", "--check", "nvml", "--wait", "--controller", api, "--kubeconfig", kc, "-o", o)
		if err != nil {
			t.Fatalf("-o %s: %v\n%s", o, err, out)
		}
		// the progress goes to stderr, which run() mixes in: none for a run already done
		if err := yaml.UnmarshalStrict([]byte(out), &runs[i]); err != nil { // JSON is YAML
			t.Fatalf("-o %s: %v\n%s", o, err, out)
		}
		if runs[i].ID != "r1" || len(runs[i].Nodes) != 1 || runs[i].Nodes[0].Results[0].Values["gpus_expected"] != 0 {
			t.Errorf("-o %s: %+v", o, runs[i])
		}
	}
	a, _ := json.Marshal(runs[0])
	b, _ := json.Marshal(runs[1])
	if string(a) != string(b) {
		t.Errorf("json and yaml differ:\n%s\n%s", a, b)
	}
	if _, err := run(t, "", "probe", "run", "--node", "gpu-1", "--check", "nvml", "--controller", api, "--kubeconfig", kc, "-o", "xml"); err == nil ||
		!strings.Contains(err.Error(), "want text, json or yaml") {
		t.Errorf("-o xml: err = %v", err)
	}
}

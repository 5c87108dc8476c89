package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/test/testenv"
)

// fakeController answers every ProbeRun created in env as the controller does once
// the run is done: one nvml result on gpu-1 with the given expected GPU count,
// written through the status subresource. It returns the kubeconfig the CLI uses.
func fakeController(t *testing.T, expected string) string {
	t.Helper()
	testenv.Integration(t)
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	env.InstallCRD(t, v1alpha1.CRDYAML)
	rc, err := v1alpha1.NewRESTClient(env.Clientset())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		done := map[string]bool{}
		for ctx.Err() == nil {
			var l v1alpha1.ProbeRunList
			if err := rc.Get().Resource(v1alpha1.ProbeRunResource).Do(ctx).Into(&l); err == nil {
				for i := range l.Items {
					pr := &l.Items[i]
					if done[pr.Name] {
						continue
					}
					now := metav1.Now()
					pr.Status = v1alpha1.ProbeRunStatus{ObservedGeneration: pr.Generation, Phase: v1alpha1.ProbeRunCompleted, Verdict: "pass",
						Checks: "nvml", NodeCount: 1, Passed: 1, StartTime: &now, CompletionTime: &now,
						Nodes: []v1alpha1.ProbeRunNode{{Node: "gpu-1", Done: true, Verdict: "pass", Results: []v1alpha1.ProbeRunResult{{
							Check: "nvml", Status: "pass", Duration: &metav1.Duration{Duration: 120 * time.Millisecond},
							Values: map[string]string{"gpu_count": "8", "gpus_expected": expected}}}}}}
					if rc.Put().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).SubResource("status").Body(pr).Do(ctx).Error() == nil {
						done[pr.Name] = true
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return env.Kubeconfig()
}

// probe run --wait creates a ProbeRun, follows its status to the end and prints the
// table. An expected GPU count of 0 turns the count's comparison off: the table
// says "not checked", never a bare 0; a count that was compared is shown as it is.
func TestProbeRunWait(t *testing.T) {
	for _, tc := range []struct {
		expected  string
		want, not string
	}{
		{"0", "gpus_expected=not checked", "gpus_expected=0"},
		{"8", "gpus_expected=8", "not checked"},
	} {
		kc := fakeController(t, tc.expected)
		out, err := run(t, "", "probe", "run", "--node", "gpu-1", "--check", "nvml", "--wait", "--kubeconfig", kc, "--timeout", "1m")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, tc.want) || strings.Contains(out, tc.not) || !strings.Contains(out, "Completed: pass") {
			t.Errorf("expected %v: want %q and no %q in\n%s", tc.expected, tc.want, tc.not, out)
		}
	}
}

// -o json and -o yaml give the ProbeRun itself, the same object; list shows it.
func TestProbeRunStructuredOutput(t *testing.T) {
	kc := fakeController(t, "0")
	var runs [2]v1alpha1.ProbeRun
	for i, o := range []string{"json", "yaml"} {
		out, err := run(t, "", "probe", "run", "--node", "gpu-1", "--check", "nvml", "--wait", "--kubeconfig", kc, "-o", o)
		if err != nil {
			t.Fatalf("-o %s: %v\n%s", o, err, out)
		}
		// the progress goes to stderr, which run() mixes in: skip to the object
		if i := strings.Index(out, map[string]string{"json": "{", "yaml": "apiVersion:"}[o]); i >= 0 {
			out = out[i:]
		}
		if err := yaml.Unmarshal([]byte(out), &runs[i]); err != nil { // JSON is YAML
			t.Fatalf("-o %s: %v\n%s", o, err, out)
		}
		st := runs[i].Status
		if runs[i].Name == "" || runs[i].Kind != "ProbeRun" || len(st.Nodes) != 1 || st.Nodes[0].Results[0].Values["gpus_expected"] != "0" {
			t.Errorf("-o %s: %+v", o, runs[i])
		}
	}
	// two runs: their times differ when they straddle a second, so each must
	// have them in order, and the rest of the status must be the same
	for i := range runs {
		st := &runs[i].Status
		if st.StartTime == nil || st.CompletionTime == nil || st.CompletionTime.Before(st.StartTime) {
			t.Errorf("run %d: start %v, completion %v", i, st.StartTime, st.CompletionTime)
		}
		st.StartTime, st.CompletionTime = nil, nil
		for n := range st.Nodes {
			st.Nodes[n].StartTime, st.Nodes[n].CompletionTime = nil, nil
			for r := range st.Nodes[n].Results {
				st.Nodes[n].Results[r].StartTime = nil
			}
		}
	}
	a, _ := json.Marshal(runs[0].Status)
	b, _ := json.Marshal(runs[1].Status)
	if string(a) != string(b) {
		t.Errorf("json and yaml differ:\n%s\n%s", a, b)
	}
	out, err := run(t, "", "probe", "list", "--kubeconfig", kc)
	if err != nil || !strings.Contains(out, runs[0].Name) || !strings.Contains(out, runs[1].Name) {
		t.Errorf("probe list: %v\n%s", err, out)
	}
	if _, err := run(t, "", "probe", "run", "--node", "gpu-1", "--check", "nvml", "--kubeconfig", kc, "-o", "xml"); err == nil ||
		!strings.Contains(err.Error(), "want text, json or yaml") {
		t.Errorf("-o xml: err = %v", err)
	}
}

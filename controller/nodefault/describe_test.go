package nodefault_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/escalate"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestDescribeGolden: what an operator reads with kubectl describe nodefault, for a
// fault confirmed by a probe, tainted, seen twice more and escalated to a drain,
// written through the Store and the Actor against the real API server. The output,
// with what changes from run to run replaced, is compared with
// testdata/describe-tainted.golden (go test -run TestDescribeGolden -update rewrites
// it). It reads top to bottom as what (the spec), why (the evidence and its query,
// the probe verdict), what was done (the history, the taint, the ladder's step) and
// what happens next (phase, recovery policy), then the Events.
func TestDescribeGolden(t *testing.T) {
	env, ctx := withNodeFaults(t, 2*time.Minute)
	cs := env.Clientset()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, err := nodefault.New(cs, nodefault.Options{Owner: "controller-0", MaxLines: 4, GrafanaURL: "https://grafana.example", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	actor, err := act.New(cs, act.Options{Instance: "controller-0", Records: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := actor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer actor.Shutdown()

	r := xidRule(t)
	r.Description = "Xid 79: the GPU has fallen off the bus"
	r.Recover = rules.Recover{Manual: true}
	firing := func(i int) fault.Fault {
		var ev []logstream.Line
		for j := range 3 {
			ev = append(ev, logstream.Line{Time: clk.Now().Add(time.Duration(j) * time.Second), Text: fmt.Sprintf("%s (firing %d, line %d)", lostLine, i, j+1)})
		}
		return fault.Fault{Node: "gpu-3", Rule: r, Count: 1, Time: ev[2].Time, Captures: map[string]string{"xid": "79"}, Evidence: ev}
	}
	record := func(c nodefault.Change) {
		t.Helper()
		if _, err := st.Record(ctx, "gpu-3", r.Pack, r.ID, c); err != nil {
			t.Fatal(err)
		}
	}
	// Events one second apart: kubectl lists them by their time, kept to the second.
	event := func(f fault.Fault, reason, msg string) {
		t.Helper()
		time.Sleep(1100 * time.Millisecond)
		if err := actor.Event(ctx, "gpu-3", f, reason, msg); err != nil {
			t.Fatal(err)
		}
	}

	// The first firing: confirmed by a probe, then tainted.
	f1 := firing(1)
	record(nodefault.Change{Fault: &f1, BootID: "boot-1", Mode: rules.ModeEnforce, Phase: v1alpha1.PhaseConfirming, Cause: nodefault.CauseProbe,
		Decision: "probe", Message: "confirming with pciebw before the taint"})
	clk.Add(30 * time.Second)
	pt, err := actor.PlaceTaint(ctx, f1, "boot-1", nodefault.Change{Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint, Decision: "taint",
		Message: "probe pciebw failed: taint placed",
		Probe:   &v1alpha1.ProbeVerdict{Purpose: "confirm", Checks: []string{"pciebw"}, Verdict: "failed", Message: "pciebw: 2.1 GB/s host to device on GPU 0, want at least 10"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pt.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	// Two more firings, each counted by the ladder, which drains the node.
	var f3 fault.Fault
	for i := 2; i <= 3; i++ {
		clk.Add(10 * time.Minute)
		f3 = firing(i)
		record(nodefault.Change{Fault: &f3, Firing: true})
	}
	clk.Add(time.Second)
	record(nodefault.Change{Step: &v1alpha1.Escalation{Step: 1, Action: "drain", State: v1alpha1.StepDone, Reason: "repeat: 3 firings within 1h",
		Message: "evicted 2 pods"}, Decision: "escalate-drain", Message: "step 1 Done (repeat: 3 firings within 1h): evicted 2 pods"})
	event(f3, escalate.ReasonEscalated, r.String()+": step 1 (drain): evicted 2 pods")

	name := nodefault.Name("gpu-3", r.Pack, r.ID)
	kubectl := testenv.Binary(t, "kubectl")
	var out string
	// The Events are sent asynchronously: describe until it lists both.
	eventually.NoError(t, 30*time.Second, "kubectl describe lists the fault's Events", func() error {
		b, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", env.Kubeconfig(), "describe", "nodefault", name).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl describe: %v\n%s", err, b)
		}
		out = string(b)
		for _, reason := range []string{act.ReasonTainted, escalate.ReasonEscalated} {
			if !strings.Contains(out, reason) {
				return fmt.Errorf("no %s Event yet:\n%s", reason, out)
			}
		}
		return nil
	})
	got := normalizeDescribe(out)
	golden := filepath.Join("testdata", "describe-tainted.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestDescribeGolden -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("kubectl describe nodefault %s differs from %s (-update rewrites it):\n%s", name, golden, got)
	}

	// Top to bottom: what (the spec: rule, description, taint asked for), why and
	// what was done (the status), then the Events in the order they happened.
	// kubectl's describer of a custom resource prints its fields sorted by name, so
	// the status reads alphabetically whatever the order of the CRD's fields.
	order := []string{"Spec:", "Description:", "Taint:", "Status:", "Evidence:", "Query:", "Events:", act.ReasonTainted, escalate.ReasonEscalated}
	at := 0
	for _, heading := range order {
		i := strings.Index(got[at:], heading)
		if i < 0 {
			t.Errorf("%q is not after %q in the describe output", heading, got[:at])
			break
		}
		at += i + len(heading)
	}
}

// normalizeDescribe replaces what differs from run to run in kubectl describe's
// output: the object's uid, resourceVersion and creation time, the Events' ages
// (and the columns' widths that follow them).
func normalizeDescribe(s string) string {
	for _, r := range []struct{ re, with string }{
		{`(?m)^(\s*Creation Timestamp:\s+).*$`, "${1}<time>"},
		{`(?m)^(\s*Resource Version:\s+).*$`, "${1}<rv>"},
		{`(?m)^(\s*UID:\s+).*$`, "${1}<uid>"},
		{`(?m)^(\s*Uid:\s+).*$`, "${1}<uid>"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	head, events, ok := strings.Cut(s, "\nEvents:\n")
	if !ok {
		return s
	}
	// The Events' table: type, reason, age, from, message, laid out again as
	// kubectl does (tabwriter, 2 spaces of padding) once the ages are replaced.
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	cols := regexp.MustCompile(`\s{2,}`)
	for i, l := range strings.Split(strings.TrimRight(events, "\n"), "\n") {
		f := cols.Split(strings.TrimSpace(l), 5)
		if len(f) == 5 && i > 1 {
			f[2] = "<age>"
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(f, "\t"))
	}
	_ = w.Flush()
	return head + "\nEvents:\n" + b.String()
}

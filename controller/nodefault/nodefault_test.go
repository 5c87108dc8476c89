package nodefault_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestName(t *testing.T) {
	if got := nodefault.Name("gpu-17", "nvidia-xid", "xid-79"); got != "gpu-17.nvidia-xid.xid-79" {
		t.Errorf("Name = %q", got)
	}
	a, b := nodefault.Name("GPU_17", "p", "r"), nodefault.Name("gpu-17", "p", "r")
	if a == b || !strings.HasPrefix(a, "gpu-17.p.r-") {
		t.Errorf("a name that needed sanitising must not collide: %q vs %q", a, b)
	}
	long := nodefault.Name(strings.Repeat("n", 300), "p", "r")
	if len(long) > 253 {
		t.Errorf("Name is %d characters long", len(long))
	}
}

func xidFault(node string, at time.Time) fault.Fault {
	r := &rules.Compiled{Pack: "nvidia-xid", ID: "xid-79", Source: rules.SourceKernel, Severity: rules.SeverityCritical,
		Action: rules.ActionTaint, Description: "GPU fell off the bus",
		Taint: rules.Taint{Key: rules.DefaultTaintKey, Value: "xid-79", Effect: "NoSchedule"}, Recover: rules.Recover{Manual: true}}
	return fault.Fault{Node: node, Rule: r, Count: 2, Time: at, Captures: map[string]string{"xid": "79"},
		Evidence: []logstream.Line{
			{Time: at.Add(-time.Second), Text: "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
			{Time: at, Text: "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."},
		}}
}

// TestNodeFaultInAPIServer runs the Store against a real API server with the CRD
// installed: created, updated, read back field for field (a field the CRD's schema
// lacks would be pruned), not writable by a node's identity, and collected after the
// retention period.
// withNodeFaults starts an apiserver with the NodeFault CRD; the context ends
// after timeout or with the test.
func withNodeFaults(t *testing.T, timeout time.Duration) (*testenv.Env, context.Context) {
	t.Helper()
	testenv.Integration(t)
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	env.InstallCRD(t, v1alpha1.CRDYAML)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return env, ctx
}

func TestNodeFaultInAPIServer(t *testing.T) {
	env, ctx := withNodeFaults(t, 2*time.Minute)
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, err := nodefault.New(env.Clientset(), nodefault.Options{Owner: "controller-0", Retention: time.Hour,
		GrafanaURL: "https://grafana.example", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	f := xidFault("gpu-17", clk.Now())

	held, err := st.Record(ctx, "", "", "", nodefault.Change{Fault: &f, BootID: "boot-1", Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseHold, Mode: rules.ModeEnforce,
		Reason: "budget", Message: "budget of 1 node used", Decision: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	if held.Name != "gpu-17.nvidia-xid.xid-79" || held.Spec.Node != "gpu-17" || held.Spec.Taint != "faultline.io/faulty=xid-79:NoSchedule" ||
		held.Status.Phase != v1alpha1.PhaseHeld || held.Status.HeldSince == nil || held.Status.Firings != 1 {
		t.Fatalf("created %+v", held)
	}
	if !strings.Contains(held.Status.Query, `node="gpu-17"`) || !strings.HasPrefix(held.Status.Link, "https://grafana.example/explore?left=") {
		t.Errorf("query %q, link %q", held.Status.Query, held.Status.Link)
	}

	clk.Add(time.Minute)
	f2 := xidFault("gpu-17", clk.Now())
	tainted, err := st.Record(ctx, "", "", "", nodefault.Change{Fault: &f2, Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint, Message: "taint placed", Decision: "taint",
		Probe: &v1alpha1.ProbeVerdict{Purpose: "confirm", Checks: []string{"pciebw"}, Verdict: "failed", Message: "pciebw: 2 GB/s"}})
	if err != nil {
		t.Fatal(err)
	}
	// A change without a mode keeps the one recorded.
	if tainted.Status.Phase != v1alpha1.PhaseTainted || tainted.Status.HeldSince != nil || tainted.Status.Firings != 2 || tainted.Status.Mode != "enforce" ||
		len(tainted.Status.History) != 2 || tainted.Status.History[1].Kind != "taint" || len(tainted.Status.Probes) != 1 ||
		!tainted.Status.LastSeen.Time.Equal(clk.Now()) || !tainted.Status.FirstSeen.Time.Equal(clk.Now().Add(-time.Minute)) {
		t.Errorf("updated status %+v", tainted.Status)
	}
	// Every field written comes back: the CRD's schema knows them all.
	got, err := st.Get(ctx, tainted.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Status, tainted.Status) || !reflect.DeepEqual(got.Spec, tainted.Spec) {
		t.Errorf("read back\n%+v\nwant\n%+v", got.Status, tainted.Status)
	}
	// Both firings' lines (two each): within MaxLines nothing is left out.
	if len(got.Status.Evidence) != 4 || got.Status.EvidenceOmitted != 0 || got.Status.Captures["xid"] != "79" || got.Status.BootID != "boot-1" || got.Status.Owner != "controller-0" {
		t.Errorf("evidence, captures, boot id or owner lost: %+v", got.Status)
	}

	t.Run("Kubectl", func(t *testing.T) {
		kubectl := func(args ...string) string {
			t.Helper()
			out, err := exec.Command(testenv.Binary(t, "kubectl"), append([]string{"--kubeconfig", env.Kubeconfig()}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		get := kubectl("get", "nodefaults")
		t.Logf("kubectl get nodefaults:\n%s", get)
		header, row, _ := strings.Cut(get, "\n")
		if strings.Join(strings.Fields(header), " ") != "NAME NODE RULE SEVERITY MODE STEP PHASE COUNT LAST-SEEN AGE" ||
			strings.Join(strings.Fields(row)[:7], " ") != "gpu-17.nvidia-xid.xid-79 gpu-17 xid-79 critical enforce Tainted 2" {
			t.Errorf("printer columns:\n%s", get)
		}
		if d := kubectl("describe", "nodefault", tainted.Name); !strings.Contains(d, "GPU has fallen off the bus") || !strings.Contains(d, "pciebw: 2 GB/s") {
			t.Errorf("describe shows no evidence or probe verdict:\n%s", d)
		}
	})

	t.Run("NotWritableByNode", func(t *testing.T) {
		_, ns := storeAs(t, env, nodefault.Options{Owner: "kubelet"}, func(cfg *rest.Config) {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:gpu-17", Groups: []string{"system:nodes", "system:authenticated"}}
		})
		other := xidFault("gpu-18", clk.Now())
		if _, err := ns.Record(ctx, "", "", "", nodefault.Change{Fault: &other, Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint}); !apierrors.IsForbidden(err) {
			t.Errorf("node creating a NodeFault: %v, want Forbidden", err)
		}
		if _, err := ns.Record(ctx, "gpu-17", "nvidia-xid", "xid-79", nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint}); !apierrors.IsForbidden(err) {
			t.Errorf("node updating its NodeFault: %v, want Forbidden", err)
		}
	})

	t.Run("Collected", func(t *testing.T) {
		resolved, err := st.Record(ctx, "gpu-17", "nvidia-xid", "xid-79", nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint, Message: "untainted by hand", Decision: "untaint"})
		if err != nil {
			t.Fatal(err)
		}
		if resolved.Status.ResolvedAt == nil || !resolved.Status.ResolvedAt.Time.Equal(clk.Now()) {
			t.Fatalf("resolvedAt %v", resolved.Status.ResolvedAt)
		}
		// A resolved record that still says it placed a taint is the taint's only
		// proof of owner: it is kept.
		owning, err := st.Record(ctx, "gpu-18", "nvidia-xid", "xid-79", nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseUntaint,
			Taint: &v1alpha1.TaintRecord{Taint: "faultline.io/faulty=xid-79:NoSchedule", State: v1alpha1.TaintPlaced}})
		if err != nil || owning.Status.Taint == nil || owning.Status.Taint.State != v1alpha1.TaintPlaced || !owning.Status.Taint.Time.Time.Equal(clk.Now()) {
			t.Fatalf("record with a taint: %+v, %v", owning, err)
		}
		if n, err := st.Collect(ctx); err != nil || n != 0 {
			t.Errorf("Collect within the retention: %d, %v", n, err)
		}
		clk.Add(time.Hour)
		if n, err := st.Collect(ctx); err != nil || n != 1 {
			t.Errorf("Collect after the retention: %d, %v", n, err)
		}
		if _, err := st.Get(ctx, resolved.Name); !apierrors.IsNotFound(err) {
			t.Errorf("after Collect: %v, want NotFound", err)
		}
		all, err := st.List(ctx)
		if err != nil || len(all) != 1 || all[0].Name != owning.Name {
			t.Errorf("List = %v, %v; want only the record that owns a taint", all, err)
		}
	})
}

// RecordOn writes on the record the caller holds without reading it first, and reads
// it again when that copy is stale; RecordNew creates without reading, and updates a
// record created meanwhile: no change is lost either way.
func TestRecordOnAndRecordNew(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	st, err := nodefault.New(env.Clientset(), nodefault.Options{Owner: "controller-0"})
	if err != nil {
		t.Fatal(err)
	}
	f := xidFault("gpu-3", time.Now())
	first, err := st.RecordNew(ctx, "gpu-3", f.Rule.Pack, f.Rule.ID, nodefault.Change{Fault: &f, Decision: "one"})
	if err != nil {
		t.Fatal(err)
	}
	// Created meanwhile (by first): RecordNew reads it and adds its change.
	if _, err := st.RecordNew(ctx, "gpu-3", f.Rule.Pack, f.Rule.ID, nodefault.Change{Decision: "two"}); err != nil {
		t.Fatal(err)
	}
	// first is stale now: RecordOn conflicts, reads again, and adds its change.
	got, err := st.RecordOn(ctx, first, nodefault.Change{Decision: "three"})
	if err != nil {
		t.Fatal(err)
	}
	if h := historyKinds(*got); h != "one,two,three" {
		t.Fatalf("history %s, want one,two,three", h)
	}
	// got is current: RecordOn writes on it.
	if again, err := st.RecordOn(ctx, got, nodefault.Change{Decision: "four"}); err != nil || len(again.Status.History) != 4 {
		t.Fatalf("RecordOn on the current copy: %v, %+v", err, again)
	}
}

// TestCreatedPlacing: a new record that only marks its taint Placing is one request,
// the create (the annotation stands for the status a create cannot write), and reads
// as Placing from every read: the Store's and the informer's. Once a status is
// written, the status alone counts, even from a Store configured without an owner.
func TestCreatedPlacing(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	var reads, conflicts, writes atomic.Int64
	cs, st := storeAs(t, env, nodefault.Options{}, func(cfg *rest.Config) {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return recordRequests{rt, &reads, &conflicts, &writes}
		}
	})
	c, err := nodefault.NewCache(cs, 0)
	if err != nil {
		t.Fatal(err)
	}
	go c.Run(ctx.Done())
	eventually.True(t, 10*time.Second, "cache synced", c.HasSynced)

	const taint = "faultline.io/faulty=xid-79:NoSchedule"
	f := xidFault("gpu-p", time.Now())
	placing := func(what string, nf *v1alpha1.NodeFault) error {
		if tr := nf.Status.Taint; tr == nil || tr.State != v1alpha1.TaintPlacing || tr.Taint != taint || tr.Time.IsZero() {
			return fmt.Errorf("%s: taint entry %+v, want %s Placing with a time", what, tr, taint)
		}
		return nil
	}
	w0 := writes.Load()
	created, err := st.RecordNew(ctx, "gpu-p", f.Rule.Pack, f.Rule.ID, nodefault.Change{Rule: f.Rule,
		Taint: &v1alpha1.TaintRecord{Taint: taint, State: v1alpha1.TaintPlacing}})
	if err != nil {
		t.Fatal(err)
	}
	if d := writes.Load() - w0; d != 1 {
		t.Fatalf("a record created placing took %d writes, want 1 (the create)", d)
	}
	if err := placing("as created", created); err != nil {
		t.Fatal(err)
	}
	if created.Spec.Taint != taint || created.Spec.Severity != string(f.Rule.Severity) {
		t.Fatalf("spec %+v: the rule's spec not filled", created.Spec)
	}
	got, err := st.Get(ctx, created.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := placing("Get", got); err != nil {
		t.Fatal(err)
	}
	l, err := st.ForNode(ctx, "gpu-p", true)
	if err != nil || len(l) != 1 {
		t.Fatalf("ForNode: %v, %d records", err, len(l))
	}
	if err := placing("ForNode", &l[0]); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "the informer reads it Placing", func() error {
		cached := c.ForNode("gpu-p")
		if len(cached) != 1 {
			return fmt.Errorf("%d cached records", len(cached))
		}
		return placing("cache", cached[0])
	})

	// Cleared (a crash before the Node update, settled): the annotation stays on
	// the object, and no longer counts.
	if _, err := st.Record(ctx, "gpu-p", f.Rule.Pack, f.Rule.ID, nodefault.Change{ClearTaint: true}); err != nil {
		t.Fatal(err)
	}
	all, err := st.List(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("List: %v, %d records", err, len(all))
	}
	if all[0].Annotations[nodefault.AnnotationPlacing] != taint || all[0].Status.Taint != nil || all[0].Status.Owner == "" {
		t.Fatalf("after the taint entry was cleared: annotations %v, status %+v", all[0].Annotations, all[0].Status)
	}
	eventually.NoError(t, 10*time.Second, "the informer reads it cleared", func() error {
		if cached := c.ForNode("gpu-p"); len(cached) != 1 || cached[0].Status.Taint != nil {
			return fmt.Errorf("cached: %+v", cached)
		}
		return nil
	})

	// A new record with more than the mark (a hold) is created, then written.
	w0 = writes.Load()
	held, err := st.RecordNew(ctx, "gpu-q", f.Rule.Pack, f.Rule.ID, nodefault.Change{Rule: f.Rule, Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseHold})
	if err != nil {
		t.Fatal(err)
	}
	if d := writes.Load() - w0; d != 2 || held.Status.Phase != v1alpha1.PhaseHeld || held.Annotations[nodefault.AnnotationPlacing] != "" {
		t.Fatalf("a held record: %d writes, phase %q, annotations %v", d, held.Status.Phase, held.Annotations)
	}
}

package controller_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

// modesPack lowers the built-in link-flap rule to annotate and adds a taint rule in
// mode observe; the built-in xid-gpu-lost stays in enforce.
const modesPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: link-flap
      mode: annotate
    - id: site-observed
      source: kernel
      severity: critical
      action: taint
      mode: observe
      match: {regex: 'site-check: retired page table full'}
`

const observedLine = "site-check: retired page table full on GPU 0000:3b:00.0"

// TestModes: with the real apiserver and Loki, a rule in mode enforce taints, one in
// mode annotate gives a NodeFault (mode annotate, phase Observed) and a
// FaultAnnotated Event but no taint, one in mode observe only counts in the metric;
// then a replica with the ceiling --max-mode=annotate records an enforce rule's fault
// without tainting, and `kubectl get nodefaults` shows the mode.
func TestModes(t *testing.T) {
	cl := newCluster(t, "gpu-0", "gpu-1", "gpu-2", "gpu-3")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(modesPack), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := decide.Config{MaxPercent: 100, DisableStorm: true}
	r := cl.start(options{packs: []string{dir}, decide: cfg})
	decided := func(r *running, kind string, mode rules.Mode) float64 {
		return testutil.ToFloat64(r.m.Decisions().WithLabelValues(kind, "ok", string(mode)))
	}
	now := time.Now()
	cl.push("gpu-2", now, observedLine)
	cl.push("gpu-1", now, linkFlap(3)...)
	cl.push("gpu-0", now, xid79)

	cl.waitFor("gpu-0 tainted by the enforce rule", 20*time.Second, func() bool { return cl.tainted("gpu-0") })
	cl.waitFor("gpu-1 annotated", 20*time.Second, func() bool { return len(cl.events("gpu-1", "FaultAnnotated")) > 0 })
	cl.waitFor("gpu-2 observed", 20*time.Second, func() bool { return decided(r, "observe", rules.ModeObserve) == 1 })

	// The record says Placed in the same write as the decision's mode and phase:
	// never one without the other.
	var nf *v1alpha1.NodeFault
	var err error
	cl.waitFor("the enforce rule's NodeFault Placed", 20*time.Second, func() bool {
		nf, err = cl.record("gpu-0", "nvidia-xid", "xid-gpu-lost")
		return err == nil && nf.Status.Taint != nil && nf.Status.Taint.State == v1alpha1.TaintPlaced
	})
	if st := nf.Status; st.Mode != string(rules.ModeEnforce) || st.Phase != v1alpha1.PhaseTainted ||
		len(st.History) == 0 || st.History[len(st.History)-1].Kind != string(decide.KindTaint) {
		t.Errorf("the enforce rule's NodeFault says Placed without its decision (mode %q, phase %q, history %+v)", st.Mode, st.Phase, st.History)
	}
	cl.waitFor("gpu-1's NodeFault with its status", 10*time.Second, func() bool {
		nf, err = cl.record("gpu-1", "network", "link-flap")
		return err == nil && nf.Status.Phase != ""
	})
	if st := nf.Status; st.Mode != string(rules.ModeAnnotate) || st.Phase != v1alpha1.PhaseObserved || st.Taint != nil ||
		len(st.Evidence) == 0 || len(st.History) == 0 || st.History[len(st.History)-1].Kind != string(decide.KindAnnotate) {
		t.Errorf("annotate rule's NodeFault status: %+v", st)
	}
	if cl.tainted("gpu-1") {
		t.Errorf("the annotate rule tainted gpu-1: %v", cl.node("gpu-1").Spec.Taints)
	}
	// Observe: counted, nothing written (the record is written before the count).
	if _, err := cl.record("gpu-2", "site", "site-observed"); !apierrors.IsNotFound(err) {
		t.Errorf("the observe rule has a NodeFault (err %v)", err)
	}
	if cl.tainted("gpu-2") || len(cl.events("gpu-2", "FaultAnnotated")) > 0 {
		t.Errorf("the observe rule acted on gpu-2: taints %v", cl.node("gpu-2").Spec.Taints)
	}
	if got := decided(r, "taint", rules.ModeEnforce); got != 1 {
		t.Errorf("decisions{taint,enforce} = %v, want 1", got)
	}
	if got := decided(r, "annotate", rules.ModeAnnotate); got != 1 {
		t.Errorf("decisions{annotate,annotate} = %v, want 1", got)
	}
	r.Stop(t)

	// The ceiling lowers the enforce rule: a NodeFault and an Event, no taint.
	cfg.MaxMode = rules.ModeAnnotate
	rb := cl.start(options{identity: "replica-b", packs: []string{dir}, decide: cfg})
	cl.push("gpu-3", time.Now(), xid79)
	cl.waitFor("gpu-3 annotated under the ceiling", 20*time.Second, func() bool { return len(cl.events("gpu-3", "FaultAnnotated")) > 0 })
	cl.waitFor("gpu-3's NodeFault in mode annotate", 10*time.Second, func() bool {
		nf, err = cl.record("gpu-3", "nvidia-xid", "xid-gpu-lost")
		return err == nil && nf.Status.Mode == string(rules.ModeAnnotate)
	})
	if cl.tainted("gpu-3") || nf.Status.Phase != v1alpha1.PhaseObserved || !strings.Contains(nf.Status.Message, "ceiling") {
		t.Errorf("under the ceiling: taints %v, status %+v", cl.node("gpu-3").Spec.Taints, nf.Status)
	}
	if got := decided(rb, "annotate", rules.ModeAnnotate); got < 1 {
		t.Errorf("decisions{annotate,annotate} = %v under the ceiling", got)
	}

	// kubectl get nodefaults asks for a Table: the Mode column comes from the CRD.
	tbl := nodeFaultTable(t, cl)
	col := map[string]int{}
	for i, c := range tbl.ColumnDefinitions {
		col[c.Name] = i
	}
	if _, ok := col["Mode"]; !ok {
		t.Fatalf("no Mode column in %+v", tbl.ColumnDefinitions)
	}
	modes := map[string]string{}
	for _, row := range tbl.Rows {
		n, _ := row.Cells[col["Node"]].(string)
		modes[n], _ = row.Cells[col["Mode"]].(string)
	}
	if want := map[string]string{"gpu-0": "enforce", "gpu-1": "annotate", "gpu-3": "annotate"}; !maps.Equal(modes, want) {
		t.Errorf("kubectl get nodefaults: node -> mode %v, want %v", modes, want)
	}
}

// nodeFaultTable lists the NodeFaults as `kubectl get` does: as a server-side Table.
func nodeFaultTable(t *testing.T, cl *cluster) *metav1.Table {
	t.Helper()
	raw, err := cl.cs.CoreV1().RESTClient().Get().AbsPath("/apis", v1alpha1.SchemeGroupVersion.Group, v1alpha1.SchemeGroupVersion.Version, "nodefaults").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("nodefaults as a table: %v", err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatalf("nodefaults table: %v", err)
	}
	return &tbl
}

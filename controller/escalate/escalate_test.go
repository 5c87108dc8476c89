package escalate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/controller/steps"
	"github.com/faultline-dev/faultline/rules"
)

const ladderPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  defaults: {source: kernel, severity: critical, action: taint}
  rules:
    - id: reset-xid
      match: {regex: 'reset-check: Xid 79'}
      escalate:
        - {action: gpu-reset, repeat: {count: 1, window: 1h}}
`

// records is the API server's copy of one record; Record and Get read and write it.
type records struct{ nf *v1alpha1.NodeFault }

func (r *records) Record(_ context.Context, _, _, _ string, ch nodefault.Change) (*v1alpha1.NodeFault, error) {
	if ch.Step != nil {
		r.nf = r.nf.DeepCopy()
		r.nf.Status.Escalation = ch.Step.DeepCopy()
	}
	return r.nf.DeepCopy(), nil
}

func (r *records) Get(context.Context, string) (*v1alpha1.NodeFault, error) {
	return r.nf.DeepCopy(), nil
}

// nodes serves a cache that holds an older copy of the record.
type nodes struct{ cached *v1alpha1.NodeFault }

func (n *nodes) BootID(string) (string, error) { return "boot-1", nil }
func (n *nodes) Escalating() ([]*v1alpha1.NodeFault, error) {
	return []*v1alpha1.NodeFault{n.cached}, nil
}
func (n *nodes) Event(context.Context, string, fault.Fault, string, string) error { return nil }

type enforce struct{}

func (enforce) Escalate(f fault.Fault, s decide.Step, _ decide.NodeFacts) decide.Decision {
	return decide.Decision{Kind: decide.KindEscalate, Fault: f, Step: &s, Mode: rules.ModeEnforce}
}

// A step a climb has taken is not taken again from a cache that has not caught up
// with the climb's write: the record as the API server holds it decides.
func TestStepNotRetakenFromAStaleCache(t *testing.T) {
	ps, err := rules.Loader{}.ParseFile("site.yaml", []byte(ladderPack))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	nf := &v1alpha1.NodeFault{ObjectMeta: metav1.ObjectMeta{Name: nodefault.Name("gpu-a", "site", "reset-xid")},
		Spec: v1alpha1.NodeFaultSpec{Node: "gpu-a", Pack: "site", Rule: "reset-xid"},
		Status: v1alpha1.NodeFaultStatus{
			Taint: &v1alpha1.TaintRecord{Taint: "faultline.io/faulty=reset-xid:NoSchedule", State: v1alpha1.TaintPlaced, Time: now},
			Escalation: &v1alpha1.Escalation{Time: &metav1.MicroTime{Time: now.Add(-time.Minute)}, Firings: []v1alpha1.Firing{
				{Time: metav1.NewMicroTime(now.Add(-time.Minute)), BootID: "boot-1"}, {Time: metav1.NewMicroTime(now.Time), BootID: "boot-1"}}},
		}}
	var resets atomic.Int32
	reg := steps.NewRegistry()
	if err := reg.Register("gpu-reset", func(context.Context, steps.Deps, steps.Target) (steps.Result, error) {
		resets.Add(1)
		return steps.Done("1 GPU(s) reset"), nil
	}); err != nil {
		t.Fatal(err)
	}
	recs := &records{nf: nf}
	l, err := New(Deps{Records: recs, Nodes: &nodes{cached: nf}, Decider: enforce{},
		Facts: func() (decide.NodeFacts, error) { return decide.NodeFacts{}, nil }, Rules: func() *rules.Set { return set },
		Steps: reg, Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "d"}, []string{"kind", "result", "mode"}),
		RecordErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "e"})})
	if err != nil {
		t.Fatal(err)
	}
	f, ok := nodefault.FaultOf(set, nf)
	if !ok {
		t.Fatal("no fault for the record")
	}
	l.climb(context.Background(), f, nf.DeepCopy())
	if resets.Load() != 1 || recs.nf.Status.Escalation.State != v1alpha1.StepDone {
		t.Fatalf("first climb: %d resets, escalation %+v", resets.Load(), recs.nf.Status.Escalation)
	}
	// The cache still holds the record before the step; a reconcile climbs from it.
	l.Reconcile(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		busy := len(l.climbing) > 0
		l.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := resets.Load(); n != 1 {
		t.Fatalf("the GPUs were reset %d times: a stale cache took the step again", n)
	}
}

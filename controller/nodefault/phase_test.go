package nodefault_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// docTransitions reads the state diagram of docs/lifecycle.md: the arrows
// "From --> To : cause" of its mermaid block, "[*]" being a record without a phase.
func docTransitions(t *testing.T) []nodefault.Transition {
	t.Helper()
	raw, err := os.ReadFile("../../docs/lifecycle.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "```mermaid\nstateDiagram-v2\n")
	if start < 0 {
		t.Fatal("docs/lifecycle.md has no mermaid state diagram")
	}
	block := doc[start:]
	block = block[:strings.Index(block[3:], "```")+3]
	arrow := regexp.MustCompile(`^\s*(\[\*\]|[A-Za-z]+) --> ([A-Za-z]+) : ([a-z-]+)\s*$`)
	var out []nodefault.Transition
	for _, line := range strings.Split(block, "\n")[2:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := arrow.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("diagram line %q is not an arrow \"From --> To : cause\"", line)
			continue
		}
		from := v1alpha1.Phase(m[1])
		if m[1] == "[*]" {
			from = nodefault.PhaseNone
		}
		out = append(out, nodefault.Transition{From: from, To: v1alpha1.Phase(m[2]), Cause: nodefault.Cause(m[3])})
	}
	return out
}

// TestLifecycleDiagramIsTheTable: the diagram of docs/lifecycle.md draws exactly
// the transitions the Store allows.
func TestLifecycleDiagramIsTheTable(t *testing.T) {
	doc := docTransitions(t)
	for _, tr := range doc {
		if !slices.Contains(nodefault.Transitions, tr) {
			t.Errorf("the diagram draws %s, the code does not allow it", tr)
		}
	}
	for _, tr := range nodefault.Transitions {
		if !slices.Contains(doc, tr) {
			t.Errorf("the code allows %s, the diagram does not draw it", tr)
		}
	}
	if len(doc) != len(nodefault.Transitions) {
		t.Errorf("the diagram has %d arrows, the table %d transitions", len(doc), len(nodefault.Transitions))
	}
}

// pathTo is the shortest walk of allowed transitions from a record without a phase
// to phase to.
func pathTo(to v1alpha1.Phase) []nodefault.Transition {
	type step struct {
		at   v1alpha1.Phase
		path []nodefault.Transition
	}
	seen := map[v1alpha1.Phase]bool{nodefault.PhaseNone: true}
	queue := []step{{at: nodefault.PhaseNone}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s.at == to {
			return s.path
		}
		for _, tr := range nodefault.Transitions {
			if tr.From == s.at && !seen[tr.To] {
				seen[tr.To] = true
				queue = append(queue, step{at: tr.To, path: append(slices.Clone(s.path), tr)})
			}
		}
	}
	return nil
}

// TestEveryTransitionInAPIServer walks every allowed transition through the Store
// against a real API server (each on a record of its own, brought to its from
// phase by allowed steps), and checks that forbidden ones are refused: an error,
// counted, the record left as it was.
func TestEveryTransitionInAPIServer(t *testing.T) {
	env, ctx := withNodeFaults(t, 3*time.Minute)
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"from", "to", "cause"})
	st, err := nodefault.New(env.Clientset(), nodefault.Options{Owner: "controller-0", Refused: refused})
	if err != nil {
		t.Fatal(err)
	}
	write := func(node string, tr nodefault.Transition) (*v1alpha1.NodeFault, error) {
		return st.Record(ctx, node, "walk", "rule", nodefault.Change{Phase: tr.To, Cause: tr.Cause, Reason: string(tr.Cause),
			Message: tr.String(), Decision: string(tr.Cause)})
	}
	for i, tr := range nodefault.Transitions {
		node := "walk-" + strings.ToLower(string(rune('a'+i/26))+string(rune('a'+i%26)))
		if tr.From != nodefault.PhaseNone {
			path := pathTo(tr.From)
			if path == nil {
				t.Errorf("%s: phase %s cannot be reached", tr, tr.From)
				continue
			}
			for _, p := range path {
				if _, err := write(node, p); err != nil {
					t.Fatalf("%s: on the way, %s: %v", tr, p, err)
				}
			}
		}
		nf, err := write(node, tr)
		if err != nil {
			t.Errorf("%s refused: %v", tr, err)
			continue
		}
		if nf.Status.Phase != tr.To || nf.Status.Reason != string(tr.Cause) {
			t.Errorf("%s: record in phase %s (%s)", tr, nf.Status.Phase, nf.Status.Reason)
		}
		if got, err := st.Get(ctx, nf.Name); err != nil || got.Status.Phase != tr.To {
			t.Errorf("%s: read back %v, %v", tr, got, err)
		}
	}
	if n := testutil.CollectAndCount(refused); n != 0 {
		t.Errorf("%d refusals counted on the allowed walk", n)
	}

	// Forbidden: a probe that passed does not make a fault Observed (it resolves
	// it); Recovering is entered from Tainted only; Observed by annotate only.
	for i, tr := range []nodefault.Transition{
		{From: v1alpha1.PhaseConfirming, To: v1alpha1.PhaseObserved, Cause: nodefault.CauseProbePassed},
		{From: v1alpha1.PhaseHeld, To: v1alpha1.PhaseRecovering, Cause: nodefault.CauseRecover},
		{From: v1alpha1.PhaseTainted, To: v1alpha1.PhaseObserved, Cause: nodefault.CauseUntaint},
		{From: nodefault.PhaseNone, To: v1alpha1.PhaseTainted, Cause: ""},
	} {
		node := "forbidden-" + string(rune('a'+i))
		for _, p := range pathTo(tr.From) {
			if _, err := write(node, p); err != nil {
				t.Fatalf("%s: on the way, %s: %v", tr, p, err)
			}
		}
		_, err := write(node, tr)
		var te *nodefault.TransitionError
		if !errors.As(err, &te) || te.Transition != tr {
			t.Errorf("%s: err %v, want a TransitionError", tr, err)
		}
		if got := testutil.ToFloat64(refused.WithLabelValues(string(tr.From), string(tr.To), string(tr.Cause))); got != 1 {
			t.Errorf("%s: counted %v times, want 1", tr, got)
		}
		if tr.From == nodefault.PhaseNone {
			if _, err := st.Get(ctx, nodefault.Name(node, "walk", "rule")); !apierrors.IsNotFound(err) {
				t.Errorf("%s: a refused first write left a record: %v", tr, err)
			}
			continue
		}
		if got, err := st.Get(ctx, nodefault.Name(node, "walk", "rule")); err != nil || got.Status.Phase != tr.From {
			t.Errorf("%s: the record moved anyway: %v, %v", tr, got.Status.Phase, err)
		}
	}

	// A fleet fault's record goes by the same table.
	g := v1alpha1.FleetGroup{Label: "rack", Value: "r1"}
	if _, _, err := st.RecordFleet(ctx, nodefault.FleetChange{Group: g, Family: "walk", Members: []string{"a", "b", "c"},
		Phase: v1alpha1.PhaseRecovering, Cause: nodefault.CauseRecover}); err == nil {
		t.Error("a fleet fault's record went to Recovering")
	}
	if _, err := st.Get(ctx, nodefault.FleetName(g, "walk")); !apierrors.IsNotFound(err) {
		t.Errorf("a refused first write left a record: %v", err)
	}
	nf, raised, err := st.RecordFleet(ctx, nodefault.FleetChange{Group: g, Family: "walk", Members: []string{"a", "b", "c"},
		Rules: []string{"link-flap", "link-down", "link-flap"}, Severity: "critical", Mode: "enforce",
		Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseRaise})
	if err != nil || !raised || nf.Spec.Rule != "link-down,link-flap" || nf.Spec.Severity != "critical" || nf.Status.Mode != "enforce" {
		t.Fatalf("fleet fault raised %v: %+v, mode %s, err %v", raised, nf.Spec, nf.Status.Mode, err)
	}
	nf, _, err = st.RecordFleet(ctx, nodefault.FleetChange{Group: g, Family: "walk", Members: []string{"a", "b", "c", "d"},
		Rules: []string{"link-down", "link-flap", "port-errors"}, Severity: "critical", Mode: "enforce",
		Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseRaise})
	if err != nil || nf.Spec.Rule != "link-down,link-flap,port-errors" || len(nf.Status.Members) != 4 {
		t.Fatalf("fleet fault grown: %+v, members %v, err %v", nf.Spec, nf.Status.Members, err)
	}
}

// TestOnlyIn: a change made only in one phase (a fleet fault raised moves its
// members' Confirming faults to Held) leaves a record in another phase as it is
// and creates none.
func TestOnlyIn(t *testing.T) {
	env, ctx := withNodeFaults(t, time.Minute)
	st, err := nodefault.New(env.Clientset(), nodefault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hold := nodefault.Change{Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseHold, Reason: "fleet", OnlyIn: v1alpha1.PhaseConfirming}
	if _, err := st.Record(ctx, "n-1", "p", "r", nodefault.Change{Phase: v1alpha1.PhaseConfirming, Cause: nodefault.CauseProbe}); err != nil {
		t.Fatal(err)
	}
	if nf, err := st.Record(ctx, "n-1", "p", "r", hold); err != nil || nf.Status.Phase != v1alpha1.PhaseHeld || nf.Status.Reason != "fleet" {
		t.Fatalf("Confirming record: %v, %v", nf, err)
	}
	if _, err := st.Record(ctx, "n-2", "p", "r", nodefault.Change{Phase: v1alpha1.PhaseTainted, Cause: nodefault.CauseTaint}); err != nil {
		t.Fatal(err)
	}
	if nf, err := st.Record(ctx, "n-2", "p", "r", hold); err != nil || nf.Status.Phase != v1alpha1.PhaseTainted {
		t.Fatalf("Tainted record: %v, %v", nf, err)
	}
	if nf, err := st.Record(ctx, "n-3", "p", "r", hold); err != nil || nf != nil {
		t.Fatalf("no record: %v, %v", nf, err)
	}
	if _, err := st.Get(ctx, nodefault.Name("n-3", "p", "r")); !apierrors.IsNotFound(err) {
		t.Fatalf("a record was created: %v", err)
	}
}

package decide_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func rule(id string, action rules.Action) *rules.Compiled {
	r := &rules.Compiled{Pack: "p", ID: id, Action: action, Severity: rules.SeverityCritical,
		Taint:   rules.Taint{Key: rules.DefaultTaintKey, Value: id, Effect: "NoSchedule"},
		Probe:   rules.Probe{OnTimeout: "ignore"},
		Recover: rules.Recover{Manual: true}}
	if action == rules.ActionProbe {
		r.Probe.Checks = []string{"pciebw", "nvml"}
	}
	return r
}

func node(i int) string { return fmt.Sprintf("gpu-%02d", i) }

func flt(n string, r *rules.Compiled) fault.Fault {
	return fault.Fault{Node: n, Rule: r, Count: 1, Time: t0,
		Evidence: []logstream.Line{{Time: t0, Text: "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}}}
}

// recordOf is the NodeFault the controller keeps of f, as far as recovery reads it.
func recordOf(f fault.Fault, bootID string) *v1alpha1.NodeFault {
	return &v1alpha1.NodeFault{
		Spec:   v1alpha1.NodeFaultSpec{Node: f.Node, Pack: f.Rule.Pack, Rule: f.Rule.ID},
		Status: v1alpha1.NodeFaultStatus{LastSeen: &metav1.Time{Time: f.Time}, BootID: bootID, Recover: f.Rule.Recover.String()},
	}
}

func newDecider(t *testing.T, cfg decide.Config, clk *clock) *decide.Decider {
	t.Helper()
	cfg.Now = clk.Now
	d, err := decide.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// short renders a decision as "taint", "hold:budget", "dry-run:hold:storm", ...
func short(d decide.Decision) string {
	s := string(d.Kind)
	if d.Kind == decide.KindDryRun {
		s += ":" + string(d.Of)
	}
	if d.Reason != "" {
		s += ":" + string(d.Reason)
	}
	return s
}

func tally(ds []decide.Decision) map[string]int {
	m := map[string]int{}
	for _, d := range ds {
		m[short(d)]++
	}
	return m
}

func TestEffectiveBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		percent  float64
		maxNodes int
		eligible int
		want     int
	}{
		{"10% of 20", 0, 0, 20, 2},
		{"10% of 25 floors", 10, 0, 25, 2},
		{"10% of 5 is at least 1", 10, 0, 5, 1},
		{"no eligible nodes", 10, 0, 0, 0},
		{"absolute cap stricter", 10, 1, 20, 1},
		{"percent stricter", 10, 50, 100, 10},
		{"2.5% of 1000", 2.5, 0, 1000, 25},
		{"29% of 100 despite float rounding", 29, 0, 100, 29},
		{"100% of 7", 100, 0, 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecider(t, decide.Config{MaxPercent: tc.percent, MaxNodes: tc.maxNodes}, newClock())
			if got := d.Config().Budget(tc.eligible); got != tc.want {
				t.Fatalf("Budget(%d) = %d, want %d", tc.eligible, got, tc.want)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []decide.Config{
		{MaxNodes: -1},
		{MaxPercent: 150},
		{MaxPercent: -5},
		{RuleBudgets: map[string]int{"p/x": -1}},
		{StormShare: 1.5},
		{StormMinNodes: -1},
		{StormWindow: -time.Minute},
		{MaxHeld: -1},
		{HeldTTL: -time.Second},
		{PendingTTL: -time.Second},
	} {
		if _, err := decide.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
	d, err := decide.New(decide.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Config()
	if c.MaxPercent != 10 || c.StormShare != 0.2 || c.StormMinNodes != 3 || c.StormWindow != 10*time.Minute {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

// TestTwentyFaultyNodes: 20 faulty nodes with a budget of 10% of 20 eligible give 2
// taints and 18 holds; untainting one node releases exactly one held fault.
func TestTwentyFaultyNodes(t *testing.T) {
	clk := newClock()
	// The storm hold is off: 20 of 20 nodes is a storm by any measure, and this test
	// is about the budget.
	d := newDecider(t, decide.Config{MaxPercent: 10, DisableStorm: true}, clk)
	r := rule("xid-79", rules.ActionTaint)
	key := r.String()
	// The caller's view lags: it does not see the taints it just applied.
	stale := decide.NodeFacts{Eligible: 20}
	var ds []decide.Decision
	for i := range 20 {
		clk.Add(time.Second)
		ds = append(ds, d.Decide(flt(node(i), r), stale))
	}
	if got, want := tally(ds), map[string]int{"taint": 2, "hold:budget": 18}; !mapsEqual(got, want) {
		t.Fatalf("decisions = %v, want %v", got, want)
	}
	if ds[0].Kind != decide.KindTaint || ds[1].Kind != decide.KindTaint {
		t.Fatalf("first two decisions = %v, %v, want taints", ds[0], ds[1])
	}
	held := d.Held()
	if len(held) != 18 {
		t.Fatalf("held %d faults, want 18", len(held))
	}
	if held[0].Fault.Node != node(2) || held[17].Fault.Node != node(19) {
		t.Fatalf("held queue not oldest first: %s .. %s", held[0].Fault.Node, held[17].Fault.Node)
	}
	if left := d.Taints().Left(stale); left != 0 {
		t.Fatalf("BudgetLeft = %d, want 0", left)
	}
	// The caller sees its two taints: nothing more can go.
	applied := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(0): {key}, node(1): {key}}}
	if rel := d.Release(applied); len(rel) != 0 {
		t.Fatalf("Release with a full budget returned %v", rel)
	}
	// gpu-00 recovers and the caller untaints it: one slot frees, and the oldest
	// held fault gets it.
	clk.Add(time.Minute)
	d.Taints().Untainted(node(0))
	after := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(1): {key}}}
	rel := d.Release(after)
	if len(rel) != 1 || rel[0].Kind != decide.KindTaint || rel[0].Fault.Node != node(2) {
		t.Fatalf("Release after one untaint = %v, want one taint of %s", rel, node(2))
	}
	if n := len(d.Held()); n != 17 {
		t.Fatalf("held %d after release, want 17", n)
	}
	// The released taint holds its slot though the facts do not show it yet.
	if rel := d.Release(after); len(rel) != 0 {
		t.Fatalf("second Release = %v, want none", rel)
	}
	st := d.Stats()
	if st.Decisions[decide.KindTaint] != 3 || st.Holds[decide.ReasonBudget] != 18 || st.Held[decide.ReasonBudget] != 17 || st.Released != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestBudgetScenarios checks sequences of faults against budgets and facts.
func TestBudgetScenarios(t *testing.T) {
	a, b := rule("a", rules.ActionTaint), rule("b", rules.ActionTaint)
	type step struct {
		node int
		rule *rules.Compiled
		want string
	}
	for _, tc := range []struct {
		name     string
		cfg      decide.Config
		eligible int
		tainted  map[string][]string
		optedOut map[string]bool
		steps    []step
		left     int // budget left at the end (with the initial facts)
	}{
		{
			name: "absolute cap stricter than percent", cfg: decide.Config{MaxNodes: 1, MaxPercent: 10}, eligible: 20,
			steps: []step{{0, a, "taint"}, {1, a, "hold:budget"}, {2, b, "hold:budget"}},
		},
		{
			name: "percent stricter than absolute cap", cfg: decide.Config{MaxNodes: 5, MaxPercent: 10}, eligible: 20,
			steps: []step{{0, a, "taint"}, {1, a, "taint"}, {2, a, "hold:budget"}},
		},
		{
			name: "per-rule budget", cfg: decide.Config{MaxPercent: 100, RuleBudgets: map[string]int{"p/a": 2}}, eligible: 20,
			steps: []step{{0, a, "taint"}, {1, a, "taint"}, {2, a, "hold:rule-budget"}, {3, b, "taint"}, {2, b, "taint"}},
			left:  16,
		},
		{
			name: "per-rule budget counts nodes in the facts", cfg: decide.Config{MaxPercent: 100, RuleBudgets: map[string]int{"p/a": 1}},
			eligible: 20, tainted: map[string][]string{node(9): {"p/a"}},
			steps: []step{{0, a, "hold:rule-budget"}, {0, b, "taint"}},
			left:  18,
		},
		{
			name: "per-rule budget of zero holds the rule", cfg: decide.Config{RuleBudgets: map[string]int{"p/a": 0}}, eligible: 20,
			steps: []step{{0, a, "hold:rule-budget"}},
			left:  2,
		},
		{
			name: "node tainted by another rule consumes no budget", cfg: decide.Config{MaxNodes: 1}, eligible: 20,
			tainted: map[string][]string{node(0): {"p/b"}},
			steps:   []step{{0, a, "taint"}, {1, a, "hold:budget"}},
		},
		{
			name: "same node, second rule after a granted taint", cfg: decide.Config{MaxNodes: 1}, eligible: 20,
			steps: []step{{0, a, "taint"}, {0, b, "taint"}, {1, b, "hold:budget"}},
		},
		{
			name: "node already carries the rule's taint", cfg: decide.Config{MaxNodes: 1}, eligible: 20,
			tainted: map[string][]string{node(0): {"p/a"}},
			steps:   []step{{0, a, "already-tainted"}, {1, a, "hold:budget"}},
		},
		{
			name: "granted taint is not granted twice", cfg: decide.Config{}, eligible: 20,
			steps: []step{{0, a, "taint"}, {0, a, "already-tainted"}},
			left:  1,
		},
		{
			name: "opted-out node", cfg: decide.Config{}, eligible: 20, optedOut: map[string]bool{node(0): true},
			steps: []step{{0, a, "hold:opted-out"}, {1, a, "taint"}},
			left:  1,
		},
		{
			name: "small cluster keeps a budget of one", cfg: decide.Config{MaxPercent: 10}, eligible: 4,
			steps: []step{{0, a, "taint"}, {1, a, "hold:budget"}},
		},
		{
			name: "no eligible nodes", cfg: decide.Config{}, eligible: 0,
			steps: []step{{0, a, "hold:budget"}},
		},
		{
			name: "budget already overrun by existing taints", cfg: decide.Config{MaxNodes: 1}, eligible: 20,
			tainted: map[string][]string{node(5): {"p/b"}, node(6): {"p/b"}},
			// Over budget, even an already-tainted node takes no new taint: the facts
			// may be stale and the node untainted by now.
			steps: []step{{0, a, "hold:budget"}, {5, a, "hold:budget"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tc.cfg.DisableStorm = true
			d := newDecider(t, tc.cfg, clk)
			facts := decide.NodeFacts{Eligible: tc.eligible, Tainted: tc.tainted, OptedOut: tc.optedOut}
			for i, s := range tc.steps {
				clk.Add(time.Second)
				dec := d.Decide(flt(node(s.node), s.rule), facts)
				if got := short(dec); got != s.want {
					t.Fatalf("step %d (%s on %s): %s, want %s (%s)", i, s.rule, node(s.node), got, s.want, dec.Message)
				}
				if dec.Message == "" {
					t.Errorf("step %d: decision without a message", i)
				}
			}
			if left := d.Taints().Left(facts); left != tc.left {
				t.Fatalf("BudgetLeft = %d, want %d", left, tc.left)
			}
		})
	}
}

// TestUntaintSeenInFacts: a caller that does not call Untainted frees the slot once
// the grant is PendingTTL old and the facts no longer show the taint.
func TestUntaintSeenInFacts(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, DisableStorm: true}, clk)
	r := rule("a", rules.ActionTaint)
	d.Decide(flt(node(0), r), decide.NodeFacts{Eligible: 20})
	d.Decide(flt(node(1), r), decide.NodeFacts{Eligible: 20})
	clk.Add(10 * time.Minute)
	tainted := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(0): {"p/a"}}}
	if rel := d.Release(tainted); len(rel) != 0 {
		t.Fatalf("Release while gpu-00 is tainted = %v", rel)
	}
	if rel := d.Release(decide.NodeFacts{Eligible: 20}); len(rel) != 1 || rel[0].Fault.Node != node(1) {
		t.Fatalf("Release after the untaint = %v", rel)
	}
}

// TestStaleFactsAfterUntaint: a lagging view that still shows a taint the caller
// removed must not let that node take a second rule's taint beyond the budget.
func TestStaleFactsAfterUntaint(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, DisableStorm: true}, clk)
	a, b := rule("a", rules.ActionTaint), rule("b", rules.ActionTaint)
	// gpu-09 was tainted (the view shows it), then untainted; gpu-07 got the slot.
	d.Taints().Untainted(node(9))
	if dec := d.Decide(flt(node(7), a), decide.NodeFacts{Eligible: 20}); dec.Kind != decide.KindTaint {
		t.Fatal(dec)
	}
	stale := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(9): {"p/a"}}}
	if dec := d.Decide(flt(node(9), b), stale); short(dec) != "hold:budget" {
		t.Fatalf("second rule on a node the stale view shows tainted, over budget: %v", dec)
	}
}

// TestRefiredOnFactsWithoutTheTaint: a decision carried out on a node found without
// its taint is made again on the facts without it (NodeFacts.Without): no longer
// "already tainted", it takes the budget, or waits for it, as a new taint does.
func TestRefiredOnFactsWithoutTheTaint(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, DisableStorm: true}, clk)
	a, b := rule("a", rules.ActionTaint), rule("b", rules.ActionTaint)
	// The view still shows gpu-00's taint of rule a, untainted since.
	stale := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(0): {"p/a", "p/b"}, node(5): {"p/a"}}}
	if dec := d.Decide(flt(node(5), a), stale); dec.Kind != decide.KindAlreadyTainted || d.Taints().Granted(node(5), "p/a") {
		t.Fatalf("on the stale view: %v, granted %v; want already tainted, nothing granted", short(dec), d.Taints().Granted(node(5), "p/a"))
	}
	fresh := stale.Without(node(5), "p/a")
	if _, ok := stale.Tainted[node(5)]; !ok {
		t.Fatal("Without changed the facts it was called on")
	}
	if _, ok := fresh.Tainted[node(5)]; ok || len(fresh.Tainted[node(0)]) != 2 {
		t.Fatalf("Without(gpu-05, p/a) = %v", fresh.Tainted)
	}
	if got := fresh.Without(node(0), "p/b").Tainted[node(0)]; !slices.Equal(got, []string{"p/a"}) {
		t.Fatalf("Without(gpu-00, p/b) left %v on gpu-00, want [p/a]", got)
	}
	// gpu-00 still carries a taint: the budget of one is used, gpu-05 waits.
	if dec := d.Decide(flt(node(5), a), fresh); short(dec) != "hold:budget" || d.Taints().Granted(node(5), "p/a") {
		t.Fatalf("decided again with gpu-00 tainted: %v", short(dec))
	}
	// Once gpu-00 is untainted too, gpu-05's new taint takes the budget.
	if dec := d.Decide(flt(node(5), b), fresh.Without(node(0), "p/a").Without(node(0), "p/b")); dec.Kind != decide.KindTaint || !d.Taints().Granted(node(5), "p/b") {
		t.Fatalf("decided again on an untainted fleet: %v", short(dec))
	}
	clk.Add(decide.DefaultPendingTTL)
	if d.Taints().Granted(node(5), "p/b") {
		t.Fatal("a grant older than PendingTTL still granted")
	}
}

// TestUntaintedFreesPendingGrant: Untainted frees the grants of a node at once.
func TestUntaintedFreesPendingGrant(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, DisableStorm: true}, clk)
	r := rule("a", rules.ActionTaint)
	stale := decide.NodeFacts{Eligible: 20}
	if dec := d.Decide(flt(node(0), r), stale); dec.Kind != decide.KindTaint {
		t.Fatal(dec)
	}
	if dec := d.Decide(flt(node(1), r), stale); short(dec) != "hold:budget" {
		t.Fatal(dec)
	}
	// The caller untaints gpu-00 before its view ever showed the taint; naming
	// another rule frees nothing.
	d.Taints().Untainted(node(0), "p/other")
	if rel := d.Release(stale); len(rel) != 0 {
		t.Fatalf("Release = %v", rel)
	}
	d.Taints().Untainted(node(0), "p/a")
	rel := d.Release(stale)
	if len(rel) != 1 || rel[0].Fault.Node != node(1) {
		t.Fatalf("Release = %v, want gpu-01", rel)
	}
	// A taint the caller failed to apply frees its slot too.
	d.Taints().NotApplied(rel[0].Fault)
	if left := d.Taints().Left(stale); left != 1 {
		t.Fatalf("BudgetLeft after NotApplied = %d, want 1", left)
	}
}

// UntaintedBefore frees the grants older than the given time only: a taint decided
// after the caller last saw the node tainted is still on its way and keeps its budget.
func TestUntaintedBeforeKeepsNewerGrants(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 2, DisableStorm: true}, clk)
	a, b := rule("a", rules.ActionTaint), rule("b", rules.ActionTaint)
	facts := decide.NodeFacts{Eligible: 20}
	d.Decide(flt(node(0), a), facts)
	clk.Add(time.Second)
	seen := clk.Now()
	clk.Add(time.Second)
	d.Decide(flt(node(0), b), facts) // decided after the caller's look
	d.Decide(flt(node(1), a), facts)
	d.Taints().UntaintedBefore(node(0), seen)
	if got := d.Decide(flt(node(2), a), facts); got.Kind != decide.KindHold {
		t.Fatalf("node 0's newer grant freed: a third node got %s, want a hold", got.Kind)
	}
	d.Taints().UntaintedBefore(node(0), clk.Now().Add(time.Second))
	if got := d.Decide(flt(node(2), a), facts); got.Kind != decide.KindTaint {
		t.Fatalf("node 0's grants all older: a third node got %s, want a taint", got.Kind)
	}
}

func TestPendingGrantExpires(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, PendingTTL: time.Minute, DisableStorm: true}, clk)
	r := rule("a", rules.ActionTaint)
	stale := decide.NodeFacts{Eligible: 20}
	d.Decide(flt(node(0), r), stale)
	d.Decide(flt(node(1), r), stale)
	clk.Add(59 * time.Second)
	if rel := d.Release(stale); len(rel) != 0 {
		t.Fatalf("released before PendingTTL: %v", rel)
	}
	clk.Add(time.Second)
	if rel := d.Release(stale); len(rel) != 1 {
		t.Fatalf("Release after PendingTTL = %v, want 1", rel)
	}
}

func TestHeldQueueDedupAndBound(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, MaxHeld: 3, DisableStorm: true}, clk)
	r := rule("a", rules.ActionTaint)
	facts := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{"busy": {"p/other"}}}
	f := flt(node(1), r)
	d.Decide(f, facts)
	clk.Add(time.Minute)
	f2 := f
	f2.Count, f2.Evidence = 7, []logstream.Line{{Time: clk.Now(), Text: "latest"}}
	d.Decide(f2, facts)
	held := d.Held()
	if len(held) != 1 || held[0].Hits != 2 || held[0].Fault.Count != 7 || held[0].Fault.Evidence[0].Text != "latest" ||
		!held[0].Since.Equal(t0) || !held[0].Updated.Equal(t0.Add(time.Minute)) {
		t.Fatalf("dedup: %+v", held)
	}
	for i := 2; i <= 5; i++ {
		clk.Add(time.Second)
		d.Decide(flt(node(i), r), facts)
	}
	held = d.Held()
	var got []string
	for _, h := range held {
		got = append(got, h.Fault.Node)
	}
	if want := []string{node(3), node(4), node(5)}; !slices.Equal(got, want) {
		t.Fatalf("held = %v, want %v (oldest evicted)", got, want)
	}
	if st := d.Stats(); st.HeldEvicted != 2 || st.EvictedBy[decide.ReasonBudget] != 2 {
		t.Fatalf("evicted = %d %v, want 2", st.HeldEvicted, st.EvictedBy)
	}
	// Opted-out entries are evicted before budget holds.
	d.Decide(flt("opted", r), decide.NodeFacts{Eligible: 20, Tainted: facts.Tainted, OptedOut: map[string]bool{"opted": true}})
	d.Decide(flt(node(6), r), facts)
	got = nil
	for _, h := range d.Held() {
		got = append(got, h.Fault.Node)
	}
	if want := []string{node(4), node(5), node(6)}; !slices.Equal(got, want) {
		t.Fatalf("held = %v, want %v", got, want)
	}
	if !d.Forget(fault.Fault{Node: node(5), Rule: r}.Key()) || d.Forget("nope") {
		t.Fatal("Forget")
	}
	if n := len(d.Held()); n != 2 {
		t.Fatalf("held %d after Forget, want 2", n)
	}
}

func TestHeldTTL(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, HeldTTL: time.Hour, DisableStorm: true}, clk)
	r := rule("a", rules.ActionTaint)
	facts := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{"busy": {"p/other"}}}
	d.Decide(flt(node(1), r), facts)
	clk.Add(time.Hour)
	if n := len(d.Held()); n != 0 {
		t.Fatalf("held %d after HeldTTL", n)
	}
	if st := d.Stats(); st.HeldExpired != 1 {
		t.Fatalf("HeldExpired = %d", st.HeldExpired)
	}
}

func TestOptedOutReleasedWhenLabelRemoved(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{}, clk)
	r := rule("a", rules.ActionTaint)
	out := decide.NodeFacts{Eligible: 20, OptedOut: map[string]bool{node(0): true}}
	if dec := d.Decide(flt(node(0), r), out); short(dec) != "hold:opted-out" {
		t.Fatal(dec)
	}
	if rel := d.Release(out); len(rel) != 0 {
		t.Fatalf("opted-out fault released: %v", rel)
	}
	rel := d.Release(decide.NodeFacts{Eligible: 20})
	if len(rel) != 1 || rel[0].Kind != decide.KindTaint {
		t.Fatalf("Release after opt-in = %v", rel)
	}
}

// TestStorm: one rule firing on 6 of 20 nodes within the window, with a share of
// 0.25, is a storm: its faults are held, other rules' are not; the storm ends once
// the rule stayed below the threshold for a whole window.
func TestStorm(t *testing.T) {
	clk := newClock()
	// The caller's facts never show the taints here, so grants must last the test.
	d := newDecider(t, decide.Config{MaxPercent: 100, StormShare: 0.25, StormMinNodes: 3, StormWindow: 10 * time.Minute,
		PendingTTL: time.Hour}, clk)
	a, b := rule("a", rules.ActionTaint), rule("b", rules.ActionTaint)
	facts := decide.NodeFacts{Eligible: 20}
	type step struct {
		at   time.Duration // since t0
		node int
		rule *rules.Compiled
		want string
	}
	steps := []step{
		{0, 0, a, "taint"},
		{1 * time.Minute, 1, a, "taint"},
		{2 * time.Minute, 2, a, "taint"},
		{3 * time.Minute, 3, a, "taint"},
		{4 * time.Minute, 4, a, "taint"}, // 5 nodes: not more than 25% of 20
		{5 * time.Minute, 5, a, "hold:storm"},
		{5 * time.Minute, 10, b, "taint"}, // another rule is not held
		{6 * time.Minute, 6, a, "hold:storm"},
		{6 * time.Minute, 0, a, "already-tainted"},
	}
	for i, s := range steps {
		clk.Add(t0.Add(s.at).Sub(clk.Now()))
		dec := d.Decide(flt(node(s.node), s.rule), facts)
		if got := short(dec); got != s.want {
			t.Fatalf("step %d: %s, want %s (%s)", i, got, s.want, dec.Message)
		}
	}
	if got := d.Storms().Active(); !slices.Equal(got, []string{"p/a"}) {
		t.Fatalf("StormActive = %v", got)
	}
	storms := d.Storms().List()
	if len(storms) != 1 || storms[0].Peak != 7 || storms[0].Threshold != 6 || !storms[0].Since.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("Storms = %+v", storms)
	}
	// Firings at 0..6m (gpu-00 again at 6m): the count falls below 6 at 12m (when
	// the 2m firing leaves the window); the storm ends a window later, at 22m.
	if want := t0.Add(22 * time.Minute); !storms[0].Until.Equal(want) {
		t.Fatalf("Until = %s, want %s", storms[0].Until, want)
	}
	if got := tally(d.Release(facts)); len(got) != 0 {
		t.Fatalf("released during the storm: %v", got)
	}
	held := d.Held()
	if len(held) != 2 || held[0].Reason != decide.ReasonStorm {
		t.Fatalf("held = %+v", held)
	}
	clk.Add(t0.Add(22*time.Minute - time.Second).Sub(clk.Now()))
	if len(d.Storms().Active()) != 1 {
		t.Fatal("storm ended early")
	}
	clk.Add(time.Second)
	if got := d.Storms().Active(); len(got) != 0 {
		t.Fatalf("storm still active at 22m: %v", got)
	}
	rel := d.Release(facts)
	if len(rel) != 2 || rel[0].Fault.Node != node(5) || rel[1].Fault.Node != node(6) || rel[0].Kind != decide.KindTaint {
		t.Fatalf("Release after the storm = %v", rel)
	}
	if st := d.Stats(); st.StormsStarted != 1 || st.StormsEnded != 1 || st.Holds[decide.ReasonStorm] != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestStormMinNodesAndRetag(t *testing.T) {
	clk := newClock()
	// 3 eligible nodes, share 0.2: more than 0.6 nodes, but at least StormMinNodes=3.
	d := newDecider(t, decide.Config{MaxNodes: 1, MaxPercent: 100}, clk)
	a := rule("a", rules.ActionTaint)
	facts := decide.NodeFacts{Eligible: 3}
	want := []string{"taint", "hold:budget", "hold:storm"}
	for i, w := range want {
		clk.Add(time.Second)
		if got := short(d.Decide(flt(node(i), a), facts)); got != w {
			t.Fatalf("fault %d: %s, want %s", i, got, w)
		}
	}
	// The budget-held fault of the storming rule now waits for the storm.
	for _, h := range d.Held() {
		if h.Reason != decide.ReasonStorm {
			t.Fatalf("held %s for %s, want storm", h.Fault.Node, h.Reason)
		}
	}
}

func TestStormOperatorRelease(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxPercent: 100, StormShare: 0.25}, clk)
	a := rule("a", rules.ActionTaint)
	facts := decide.NodeFacts{Eligible: 20}
	for i := range 8 {
		clk.Add(time.Second)
		d.Decide(flt(node(i), a), facts)
	}
	if d.Storms().Release("p/none") {
		t.Fatal("released a storm that does not exist")
	}
	if !d.Storms().Release("p/a") {
		t.Fatal("ReleaseStorm failed")
	}
	if got := d.Storms().Active(); len(got) != 0 {
		t.Fatalf("StormActive after release = %v", got)
	}
	if rel := d.Release(facts); len(rel) != 3 {
		t.Fatalf("Release after the operator's release = %v, want 3", rel)
	}
	// The same wave does not trigger the storm again.
	clk.Add(time.Second)
	if dec := d.Decide(flt(node(12), a), facts); dec.Kind != decide.KindTaint {
		t.Fatalf("after release: %v", dec)
	}
	if st := d.Storms().List(); len(st) != 1 || !st[0].Released {
		t.Fatalf("Storms = %+v", st)
	}
}

// TestStormStateRoundTrip: a new decider that restores the saved storm state (through
// JSON, as the checkpoint keeps it) goes on with the storms: one still holds, a
// released one stays released, and firings within the window still count.
func TestStormStateRoundTrip(t *testing.T) {
	clk := newClock()
	cfg := decide.Config{MaxPercent: 100, StormShare: 0.25}
	d := newDecider(t, cfg, clk)
	a, b, c := rule("a", rules.ActionTaint), rule("b", rules.ActionTaint), rule("c", rules.ActionTaint)
	facts := decide.NodeFacts{Eligible: 20}
	for i := range 6 { // 6 nodes > 25 % of 20: a storm for a and for b
		clk.Add(time.Second)
		d.Decide(flt(node(i), a), facts)
		d.Decide(flt(node(i), b), facts)
	}
	for i := range 4 { // below the threshold of c
		d.Decide(flt(node(i), c), facts)
	}
	if !d.Storms().Release("p/b") {
		t.Fatal("ReleaseStorm(p/b) failed")
	}
	raw, trimmed, err := d.Storms().State().Encode(1 << 20)
	if err != nil || trimmed {
		t.Fatal(trimmed, err)
	}
	// Within a tight limit the nodes go and the storms stay.
	small, trimmed, err := d.Storms().State().Encode(len(raw) - 1)
	var bare decide.StormState
	if err != nil || !trimmed || json.Unmarshal(small, &bare) != nil || len(bare.Rules) != 3 || !bare.Rules[0].Active ||
		!bare.Rules[1].Released || len(bare.Rules[0].Fires) != 0 {
		t.Fatalf("Encode within %d bytes: %s, %v, %v", len(raw)-1, small, trimmed, err)
	}
	var st decide.StormState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	next := newDecider(t, cfg, clk)
	if got := next.Storms().Restore(st); !reflect.DeepEqual(got, []string{"p/a", "p/b"}) {
		t.Fatalf("RestoreStorms = %v (state %s)", got, raw)
	}
	if got := next.Storms().Active(); !reflect.DeepEqual(got, []string{"p/a"}) {
		t.Fatalf("StormActive = %v, want only the unreleased storm", got)
	}
	if dec := next.Decide(flt(node(10), a), facts); dec.Kind != decide.KindHold || dec.Reason != decide.ReasonStorm {
		t.Fatalf("a fault of the storm after the restore: %v", short(dec))
	}
	if dec := next.Decide(flt(node(10), b), facts); dec.Kind != decide.KindTaint {
		t.Fatalf("a fault of the released storm after the restore: %v", short(dec))
	}
	// c fired on 4 nodes before: the fifth is still below the threshold, the sixth is a storm.
	if dec := next.Decide(flt(node(10), c), facts); dec.Kind != decide.KindTaint {
		t.Fatalf("c's fifth node: %v", short(dec))
	}
	if dec := next.Decide(flt(node(11), c), facts); dec.Kind != decide.KindHold || dec.Reason != decide.ReasonStorm {
		t.Fatalf("c's sixth node: %v, want a storm from the restored firings", short(dec))
	}
}

// TestRecoveriesNotFrozen: a storm and an exhausted budget never hold a recovery.
func TestRecoveriesNotFrozen(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, StormShare: 0.1}, clk)
	a := rule("a", rules.ActionTaint)
	a.Recover = rules.Recover{After: rules.Duration(time.Hour)}
	full := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(0): {"p/a"}}}
	for i := 1; i < 10; i++ {
		d.Decide(flt(node(i), a), full)
	}
	if len(d.Storms().Active()) != 1 || d.Taints().Left(full) != 0 {
		t.Fatalf("setup: storm %v, budget left %d", d.Storms().Active(), d.Taints().Left(full))
	}
	// gpu-00's fault is two hours old and quiet since: it recovers during the storm
	// and with no budget left.
	old := flt(node(0), a)
	old.Time = t0.Add(-2 * time.Hour)
	active := decide.ActiveFault{Node: node(0), Rule: a, Record: recordOf(old, "boot-1")}
	ok, why := d.Recoverable(active, clk.Now(), "boot-1", old.Time)
	if !ok {
		t.Fatalf("recovery frozen: %s", why)
	}
	reboot := rule("r", rules.ActionTaint)
	reboot.Recover = rules.Recover{OnReboot: true}
	active = decide.ActiveFault{Node: node(0), Rule: reboot, Record: recordOf(flt(node(0), reboot), "boot-1")}
	if ok, why := d.Recoverable(active, time.Time{}, "boot-2", time.Time{}); !ok {
		t.Fatalf("reboot recovery frozen: %s", why)
	}
	if len(d.Storms().Active()) != 1 {
		t.Fatal("the storm ended during the test")
	}
}

func TestEventRulesNeverHeld(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1, StormShare: 0.1}, clk)
	ev := rule("ev", rules.ActionEvent)
	facts := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{"x": {"p/a"}},
		OptedOut: map[string]bool{node(3): true}}
	for i := range 20 {
		clk.Add(time.Second)
		if dec := d.Decide(flt(node(i), ev), facts); dec.Kind != decide.KindEvent {
			t.Fatalf("event rule on %s: %v", node(i), dec)
		}
	}
	if len(d.Held()) != 0 || len(d.Storms().Active()) != 0 {
		t.Fatalf("event rule held: %v storms %v", d.Held(), d.Storms().Active())
	}
}

func TestNoneAndUnknownActions(t *testing.T) {
	d := newDecider(t, decide.Config{}, newClock())
	for _, act := range []rules.Action{rules.ActionNone, "info", ""} {
		if dec := d.Decide(flt(node(0), rule("n", act)), decide.NodeFacts{Eligible: 20}); dec.Kind != decide.KindNone {
			t.Errorf("action %q: %v", act, dec)
		}
	}
	if dec := d.Decide(fault.Fault{Node: "x"}, decide.NodeFacts{}); dec.Kind != decide.KindNone {
		t.Errorf("nil rule: %v", dec)
	}
}

func TestProbeFlow(t *testing.T) {
	p := rule("pcie", rules.ActionProbe)
	pt := rule("pcie-strict", rules.ActionProbe)
	pt.Probe.OnTimeout = "taint"
	type result struct{ failed, timedOut bool }
	for _, tc := range []struct {
		name    string
		rule    *rules.Compiled
		tainted map[string][]string
		res     result
		want    string
	}{
		{"pass", p, nil, result{}, "none"},
		{"fail within budget", p, nil, result{failed: true}, "taint"},
		{"fail without budget", p, map[string][]string{"a": {"p/x"}, "b": {"p/x"}}, result{failed: true}, "hold:budget"},
		{"timeout ignored", p, nil, result{timedOut: true}, "none"},
		{"timeout taints", pt, nil, result{timedOut: true}, "taint"},
		{"fail on an already tainted node", p, map[string][]string{node(0): {"p/pcie"}}, result{failed: true}, "already-tainted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecider(t, decide.Config{}, newClock())
			facts := decide.NodeFacts{Eligible: 20, Tainted: tc.tainted}
			f := flt(node(0), tc.rule)
			first := d.Decide(f, facts)
			if tc.want == "already-tainted" {
				if first.Kind != decide.KindAlreadyTainted {
					t.Fatalf("Decide = %v", first)
				}
			} else if first.Kind != decide.KindProbe {
				t.Fatalf("Decide = %v, want probe (probes need no budget)", first)
			}
			dec := d.DecideProbe(f, decide.ProbeResult{Outcome: decide.OutcomeOf(tc.res.failed, tc.res.timedOut)}, facts)
			if got := short(dec); got != tc.want {
				t.Fatalf("DecideProbe = %s, want %s (%s)", got, tc.want, dec.Message)
			}
		})
	}
}

func TestProbeHeldThenReleasedAsTaint(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 1}, clk)
	p := rule("pcie", rules.ActionProbe)
	full := decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{"other": {"p/x"}}}
	f := flt(node(0), p)
	d.Decide(f, full)
	if dec := d.DecideProbe(f, decide.ProbeResult{Outcome: decide.ProbesFailed}, full); short(dec) != "hold:budget" {
		t.Fatal(dec)
	}
	// The rule fires again while held: no second probe, the fault stays held.
	clk.Add(time.Minute)
	if dec := d.Decide(f, full); short(dec) != "hold:budget" {
		t.Fatalf("refire of a probe-confirmed held fault: %v", dec)
	}
	if h := d.Held(); len(h) != 1 || !h[0].ProbeFailed || h[0].Hits != 2 {
		t.Fatalf("held = %+v", h)
	}
	rel := d.Release(decide.NodeFacts{Eligible: 20})
	if len(rel) != 1 || rel[0].Kind != decide.KindTaint {
		t.Fatalf("Release = %v, want a taint", rel)
	}
	// A later pass clears a held fault of the same key.
	g := flt(node(1), p)
	d.DecideProbe(g, decide.ProbeResult{Outcome: decide.ProbesFailed}, full)
	if dec := d.DecideProbe(g, decide.ProbeResult{Outcome: decide.ProbesPassed}, full); dec.Kind != decide.KindNone || len(d.Held()) != 0 {
		t.Fatalf("pass after hold: %v, held %v", dec, d.Held())
	}
}

func TestProbeStormHoldsProbes(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{}, clk)
	p := rule("pcie", rules.ActionProbe)
	facts := decide.NodeFacts{Eligible: 10}
	want := []string{"probe", "probe", "hold:storm", "hold:storm"}
	for i, w := range want {
		clk.Add(time.Second)
		if got := short(d.Decide(flt(node(i), p), facts)); got != w {
			t.Fatalf("fault %d: %s, want %s", i, got, w)
		}
	}
	d.Storms().Release("p/pcie")
	rel := d.Release(facts)
	if len(rel) != 2 || rel[0].Kind != decide.KindProbe {
		t.Fatalf("Release = %v, want two probes", rel)
	}
}

// TestDryRun: every decision becomes a dry-run and nothing is recorded.
func TestDryRun(t *testing.T) {
	a, ev, p, none := rule("a", rules.ActionTaint), rule("ev", rules.ActionEvent), rule("p", rules.ActionProbe), rule("n", rules.ActionNone)
	for _, tc := range []struct {
		name  string
		f     fault.Fault
		facts decide.NodeFacts
		want  string
	}{
		{"taint", flt(node(0), a), decide.NodeFacts{Eligible: 20}, "dry-run:taint"},
		{"budget", flt(node(0), a), decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{"x": nil, "y": nil}}, "dry-run:hold:budget"},
		{"opted out", flt(node(0), a), decide.NodeFacts{Eligible: 20, OptedOut: map[string]bool{node(0): true}}, "dry-run:hold:opted-out"},
		{"already", flt(node(0), a), decide.NodeFacts{Eligible: 20, Tainted: map[string][]string{node(0): {"p/a"}}}, "dry-run:already-tainted"},
		{"event", flt(node(0), ev), decide.NodeFacts{Eligible: 20}, "dry-run:event"},
		{"probe", flt(node(0), p), decide.NodeFacts{Eligible: 20}, "dry-run:probe"},
		{"none", flt(node(0), none), decide.NodeFacts{Eligible: 20}, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			d := newDecider(t, decide.Config{DryRun: true, StormMinNodes: 1, StormShare: 0.01}, clk)
			left := d.Taints().Left(tc.facts)
			for range 3 {
				clk.Add(time.Second)
				dec := d.Decide(tc.f, tc.facts)
				if got := short(dec); got != tc.want {
					t.Fatalf("Decide = %s, want %s", got, tc.want)
				}
				if dec.Kind == decide.KindDryRun && !strings.HasPrefix(dec.Message, "dry-run: would ") {
					t.Fatalf("message %q", dec.Message)
				}
			}
			if dec := d.DecideProbe(flt(node(1), a), decide.ProbeResult{Outcome: decide.ProbesFailed}, tc.facts); dec.Kind != decide.KindDryRun {
				t.Fatalf("DecideProbe = %v", dec)
			}
			if d.Taints().Left(tc.facts) != left || len(d.Held()) != 0 || len(d.Storms().Active()) != 0 || d.Release(tc.facts) != nil {
				t.Fatalf("dry-run changed state: left %d->%d held %v storms %v", left, d.Taints().Left(tc.facts), d.Held(), d.Storms().Active())
			}
			if st := d.Stats(); st.PendingTaints != 0 || len(st.Holds) != 0 {
				t.Fatalf("stats = %+v", st)
			}
		})
	}
}

func TestRecoverable(t *testing.T) {
	pol := func(r rules.Recover) *rules.Compiled {
		c := rule("r", rules.ActionTaint)
		c.Recover = r
		return c
	}
	h := func(n int) time.Duration { return time.Duration(n) * time.Hour }
	for _, tc := range []struct {
		name      string
		rule      *rules.Compiled
		recorded  string // the record's status.recover, used when rule is nil
		bootID    string // recorded with the fault
		nodeBoot  string
		now       time.Duration // since the fault
		lastMatch time.Duration // since the fault; < 0 means none
		probes    time.Duration // probes passed at; < 0 means never
		want      bool
	}{
		{name: "manual never", rule: pol(rules.Recover{Manual: true}), now: h(1000), lastMatch: -1, probes: 1, want: false},
		{name: "empty policy is manual", rule: pol(rules.Recover{}), now: h(1000), lastMatch: -1, probes: -1, want: false},
		{name: "after: too early", rule: pol(rules.Recover{After: rules.Duration(h(24))}), now: h(23), lastMatch: -1, probes: -1, want: false},
		{name: "after: quiet long enough", rule: pol(rules.Recover{After: rules.Duration(h(24))}), now: h(24), lastMatch: -1, probes: -1, want: true},
		{name: "after: a later match restarts the wait", rule: pol(rules.Recover{After: rules.Duration(h(24))}), now: h(30), lastMatch: h(10), probes: -1, want: false},
		{name: "after: quiet since the last match", rule: pol(rules.Recover{After: rules.Duration(h(24))}), now: h(34), lastMatch: h(10), probes: -1, want: true},
		{name: "reboot: same boot", rule: pol(rules.Recover{OnReboot: true}), bootID: "b1", nodeBoot: "b1", now: h(1), lastMatch: -1, probes: -1, want: false},
		{name: "reboot: new boot", rule: pol(rules.Recover{OnReboot: true}), bootID: "b1", nodeBoot: "b2", lastMatch: -1, probes: -1, want: true},
		{name: "reboot: no recorded boot id", rule: pol(rules.Recover{OnReboot: true}), nodeBoot: "b2", lastMatch: -1, probes: -1, want: false},
		{name: "reboot: node boot id unknown", rule: pol(rules.Recover{OnReboot: true}), bootID: "b1", lastMatch: -1, probes: -1, want: false},
		{name: "after or reboot: reboot suffices", rule: pol(rules.Recover{After: rules.Duration(h(24)), OnReboot: true}), bootID: "b1", nodeBoot: "b2", now: h(1), lastMatch: -1, probes: -1, want: true},
		{name: "probes only: none passed", rule: pol(rules.Recover{Probes: []string{"pciebw"}}), now: h(1), lastMatch: -1, probes: -1, want: false},
		{name: "probes only: passed", rule: pol(rules.Recover{Probes: []string{"pciebw"}}), now: h(1), lastMatch: -1, probes: h(1), want: true},
		{name: "probes only: pass before the last match", rule: pol(rules.Recover{Probes: []string{"pciebw"}}), now: h(3), lastMatch: h(2), probes: h(1), want: false},
		{name: "after+probes: quiet, no probe", rule: pol(rules.Recover{After: rules.Duration(h(24)), Probes: []string{"pciebw"}}), now: h(25), lastMatch: -1, probes: -1, want: false},
		{name: "after+probes: quiet and passed", rule: pol(rules.Recover{After: rules.Duration(h(24)), Probes: []string{"pciebw"}}), now: h(25), lastMatch: -1, probes: h(25), want: true},
		{name: "after+probes: passed but not quiet", rule: pol(rules.Recover{After: rules.Duration(h(24)), Probes: []string{"pciebw"}}), now: h(2), lastMatch: -1, probes: h(2), want: false},
		{name: "rule gone: recorded after", recorded: "after 24h", now: h(25), lastMatch: -1, probes: -1, want: true},
		{name: "rule gone: recorded manual", recorded: "manual", now: h(250), lastMatch: -1, probes: -1, want: false},
		{name: "rule gone: recorded reboot+probes", recorded: "on reboot, when probes [pciebw nvml] pass", bootID: "b1", nodeBoot: "b2", lastMatch: -1, probes: h(1), now: h(1), want: true},
		{name: "rule gone: unknown policy", recorded: "whenever", now: h(250), lastMatch: -1, probes: -1, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecider(t, decide.Config{}, newClock())
			r := tc.rule
			if r == nil {
				r = pol(rules.Recover{Manual: true})
			}
			a := decide.ActiveFault{Node: node(0), Rule: tc.rule, Record: recordOf(flt(node(0), r), tc.bootID)}
			if tc.rule == nil {
				a.Record.Status.Recover = tc.recorded
			}
			if tc.probes >= 0 {
				a.ProbesPassed = t0.Add(tc.probes)
			}
			var last time.Time
			if tc.lastMatch >= 0 {
				last = t0.Add(tc.lastMatch)
			}
			ok, why := d.Recoverable(a, t0.Add(tc.now), tc.nodeBoot, last)
			if ok != tc.want || why == "" {
				t.Fatalf("Recoverable = %v (%s), want %v", ok, why, tc.want)
			}
		})
	}
}

func TestParseRecoverRoundTrip(t *testing.T) {
	for _, r := range []rules.Recover{
		{Manual: true},
		{After: rules.Duration(24 * time.Hour)},
		{OnReboot: true},
		{Probes: []string{"pciebw"}},
		{After: rules.Duration(90 * time.Minute), OnReboot: true, Probes: []string{"pciebw", "dgemm"}},
	} {
		got, ok := decide.ParseRecover(r.String())
		if !ok || got.String() != r.String() {
			t.Errorf("ParseRecover(%q) = %+v, %v", r.String(), got, ok)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	clk := newClock()
	d := newDecider(t, decide.Config{MaxNodes: 3}, clk)
	r := rule("a", rules.ActionTaint)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				facts := decide.NodeFacts{Eligible: 100}
				d.Decide(flt(node(g*50+i), r), facts)
				d.Release(facts)
				d.Held()
				d.Stats()
				d.Storms().Active()
				clk.Add(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if st := d.Stats(); st.Decisions[decide.KindTaint] > 3 {
		t.Fatalf("%d taints with a budget of 3", st.Decisions[decide.KindTaint])
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

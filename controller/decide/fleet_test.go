package decide_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

const rackLabel = "topology.kubernetes.io/rack"

// topoIndex answers the topology questions as the controller's index does
// (NodeFacts.Groups), from a map of node → topology values.
type topoIndex struct {
	labels map[string]map[string]string
	sizes  map[decide.Group]int
}

func (x topoIndex) Labels(node string) map[string]string { return x.labels[node] }
func (x topoIndex) Size(g decide.Group) int              { return x.sizes[g] }

// rackFacts: nodes 0-5 in rack a, 6-9 in rack b, all in zone z, none tainted.
func rackFacts() decide.NodeFacts {
	x := topoIndex{labels: map[string]map[string]string{}, sizes: map[decide.Group]int{}}
	for i := range 10 {
		rack := "a"
		if i >= 6 {
			rack = "b"
		}
		x.labels[node(i)] = map[string]string{rackLabel: rack, "topology.kubernetes.io/zone": "z"}
		x.sizes[decide.Group{Label: rackLabel, Value: rack}]++
		x.sizes[decide.Group{Label: "topology.kubernetes.io/zone", Value: "z"}]++
	}
	return decide.NodeFacts{Eligible: 10, Tainted: map[string][]string{}, Groups: x}
}

func fleetConfig() decide.Config {
	return decide.Config{MaxPercent: 100, DisableStorm: true,
		Fleet: decide.FleetConfig{Labels: []string{rackLabel, "topology.kubernetes.io/zone"}, MinNodes: 3, MinShare: 0.3}}
}

// taintAll applies taint decisions to facts as the caller would.
func applyTaint(facts decide.NodeFacts, dec decide.Decision) {
	if dec.Kind == decide.KindTaint {
		facts.Tainted[dec.Fault.Node] = append(facts.Tainted[dec.Fault.Node], dec.Fault.Rule.String())
	}
}

// TestFleetFault: link flaps on the 6 nodes of rack a raise one fleet fault for the
// rack (not the zone, the larger group); from the third node on the taints are
// held with reason fleet; a node of rack b is a node fault. Release taints the held
// ones; dismiss drops them instead.
func TestFleetFault(t *testing.T) {
	for _, verdict := range []decide.Verdict{decide.VerdictReleased, decide.VerdictDismissed} {
		t.Run(string(verdict), func(t *testing.T) {
			clk := newClock()
			d := newDecider(t, fleetConfig(), clk)
			facts := rackFacts()
			r := rule("link-flap", rules.ActionTaint)
			var got []string
			for i := range 6 {
				dec := d.Decide(flt(node(i), r), facts)
				applyTaint(facts, dec)
				got = append(got, short(dec))
				clk.Add(time.Second)
			}
			want := []string{"taint", "taint", "hold:fleet", "hold:fleet", "hold:fleet", "hold:fleet"}
			if !slices.Equal(got, want) {
				t.Fatalf("rack a decisions %v, want %v", got, want)
			}
			fl := d.Fleet().Faults()
			if len(fl) != 1 || fl[0].Group.Label != rackLabel || fl[0].Group.Value != "a" || fl[0].Family != "p" || !fl[0].Pending() {
				t.Fatalf("fleet faults %+v, want one pending for rack a, family p", fl)
			}
			if want := []string{node(0), node(1), node(2), node(3), node(4), node(5)}; !slices.Equal(fl[0].Members, want) {
				t.Errorf("members %v, want %v", fl[0].Members, want)
			}
			if dec := d.Decide(flt(node(6), r), facts); dec.Kind != decide.KindTaint {
				t.Errorf("rack b node: %s, want a taint", dec)
			} else {
				applyTaint(facts, dec)
			}
			if rel := d.Release(facts); len(rel) != 0 {
				t.Fatalf("released %v before a verdict", rel)
			}
			// The saved state brings the pending fleet fault to a new leader.
			raw, err := json.Marshal(d.Fleet().State())
			if err != nil {
				t.Fatal(err)
			}
			var st decide.FleetState
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Fatal(err)
			}
			d = newDecider(t, fleetConfig(), clk)
			for _, h := range heldOf(t, fl[0].Members[2:], r) {
				d.Restore(h)
			}
			if pending := d.Fleet().Restore(st); !slices.Equal(pending, []string{rackLabel + "=a/p"}) {
				t.Fatalf("restored pending %v", pending)
			}
			if dec := d.Decide(flt(node(3), r), facts); short(dec) != "hold:fleet" {
				t.Fatalf("after restore: %s, want hold:fleet", dec)
			}
			g := decide.Group{Label: rackLabel, Value: "a"}
			switch verdict {
			case decide.VerdictReleased:
				if !d.Fleet().Release(g, "p") {
					t.Fatal("release: not pending")
				}
				var tainted []string
				for _, dec := range d.Release(facts) {
					if dec.Kind == decide.KindTaint {
						tainted = append(tainted, dec.Fault.Node)
					}
				}
				slices.Sort(tainted)
				if want := []string{node(2), node(3), node(4), node(5)}; !slices.Equal(tainted, want) {
					t.Errorf("released taints %v, want %v", tainted, want)
				}
			case decide.VerdictDismissed:
				dropped, ok := d.Fleet().Dismiss(g, "p")
				if !ok || len(dropped) != 4 {
					t.Fatalf("dismiss: %d dropped, %v; want 4", len(dropped), ok)
				}
				if rel := d.Release(facts); len(rel) != 0 || len(d.Held()) != 0 {
					t.Errorf("after dismiss: released %v, held %v", rel, d.Held())
				}
				if dec := d.Decide(flt(node(4), r), facts); dec.Kind != decide.KindNone {
					t.Errorf("a member's firing after dismiss: %s, want none", dec)
				}
			}
			if d.Fleet().Release(g, "p") {
				t.Error("a second verdict was accepted")
			}
		})
	}
}

func heldOf(t *testing.T, nodes []string, r *rules.Compiled) []decide.HeldFault {
	t.Helper()
	var out []decide.HeldFault
	for _, n := range nodes {
		out = append(out, decide.HeldFault{Fault: flt(n, r), Reason: decide.ReasonFleet, Since: t0, Updated: t0, Hits: 1})
	}
	return out
}

// TestFleetThreshold: two nodes of a rack, or firings spread over more than the
// window, or a share of the group below MinShare raise no fleet fault.
func TestFleetThreshold(t *testing.T) {
	clk := newClock()
	cfg := fleetConfig()
	cfg.Fleet.MinShare = 0.5
	cfg.Fleet.Window = time.Minute
	d := newDecider(t, cfg, clk)
	facts := rackFacts()
	r := rule("link-flap", rules.ActionTaint)
	// Nodes of rack a, two minutes apart: never three within the window.
	for _, i := range []int{0, 1, 2, 3} {
		if dec := d.Decide(flt(node(i), r), facts); dec.Kind != decide.KindTaint {
			t.Fatalf("%s: %s, want a taint", node(i), dec)
		}
		clk.Add(2 * time.Minute)
	}
	// One node of rack b and two of rack a within the window: three nodes of zone z
	// (10 nodes), below half of it; rack a has 2 firings within the window.
	for _, i := range []int{6, 4, 5} {
		d.Decide(flt(node(i), r), facts)
	}
	if fl := d.Fleet().Faults(); len(fl) != 0 {
		t.Fatalf("fleet faults %+v, want none", fl)
	}
}

// TestGroupBudget: a 50 % group budget lets 3 of rack a's 6 nodes be tainted.
func TestGroupBudget(t *testing.T) {
	clk := newClock()
	cfg := fleetConfig()
	cfg.Fleet.MinNodes, cfg.Fleet.MinShare, cfg.Fleet.GroupBudget = 100, 1, 50
	d := newDecider(t, cfg, clk)
	facts := rackFacts()
	r := rule("ecc", rules.ActionTaint)
	var got []string
	for i := range 5 {
		dec := d.Decide(flt(node(i), r), facts)
		applyTaint(facts, dec)
		got = append(got, short(dec))
	}
	if want := []string{"taint", "taint", "taint", "hold:group-budget", "hold:group-budget"}; !slices.Equal(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if _, err := decide.New(decide.Config{Fleet: decide.FleetConfig{Labels: []string{rackLabel}, GroupBudget: 101}}); err == nil {
		t.Error("a group budget over 100 % was accepted")
	}
}

// TestFleetFaultDryRun: in dry-run the fleet fault is raised as it would be, its
// members' decisions say they would be held for it, nothing is held, and it is
// forgotten once its group is quiet for a window (no verdict is waited for).
func TestFleetFaultDryRun(t *testing.T) {
	clk := newClock()
	cfg := fleetConfig()
	cfg.DryRun = true
	d := newDecider(t, cfg, clk)
	facts := rackFacts()
	r := rule("link-flap", rules.ActionTaint)
	var got []string
	for i := range 6 {
		dec := d.Decide(flt(node(i), r), facts)
		got = append(got, string(dec.Kind)+"("+string(dec.Of)+":"+string(dec.Reason)+")")
		clk.Add(time.Second)
	}
	want := []string{"dry-run(taint:)", "dry-run(taint:)", "dry-run(hold:fleet)", "dry-run(hold:fleet)", "dry-run(hold:fleet)", "dry-run(hold:fleet)"}
	if !slices.Equal(got, want) {
		t.Fatalf("rack a decisions %v, want %v", got, want)
	}
	if fl := d.Fleet().Faults(); len(fl) != 1 || fl[0].Group.Value != "a" || len(fl[0].Members) != 6 {
		t.Fatalf("fleet faults %+v, want the one of rack a with its six nodes", fl)
	}
	if h := d.Held(); len(h) != 0 {
		t.Errorf("dry-run held %d faults", len(h))
	}
	clk.Add(decide.DefaultFleetWindow + time.Second)
	if fl := d.Fleet().Faults(); len(fl) != 0 {
		t.Errorf("fleet faults %+v a window after the last firing, want none in dry-run", fl)
	}
}

// TestFleetFaultBeforeStorm: one incident, one brake. A rack's link flaps that are
// also a storm of the rule are held by the fleet fault alone (it names the cause):
// the faults it holds are not taken over by the storm that starts later, while the
// storm holds the rule's faults elsewhere. The fleet fault names its members'
// rules, their highest severity and the mode they acted in.
func TestFleetFaultBeforeStorm(t *testing.T) {
	clk := newClock()
	cfg := fleetConfig()
	cfg.DisableStorm, cfg.StormShare, cfg.StormMinNodes = false, 0.2, 5
	d := newDecider(t, cfg, clk)
	facts := rackFacts()
	flap, down := rule("link-flap", rules.ActionTaint), rule("link-down", rules.ActionTaint)
	down.Severity = rules.SeverityWarning
	var got []string
	for i := range 7 {
		r := flap
		if i == 5 {
			r = down
		}
		dec := d.Decide(flt(node(i), r), facts)
		applyTaint(facts, dec)
		got = append(got, short(dec))
		clk.Add(time.Second)
	}
	// The storm of link-flap starts at its fifth node (gpu-04), in rack a: the
	// fleet fault raised at the third holds it; gpu-06, in rack b, is the storm's.
	want := []string{"taint", "taint", "hold:fleet", "hold:fleet", "hold:fleet", "hold:fleet", "hold:storm"}
	if !slices.Equal(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if storms := d.Storms().Active(); !slices.Equal(storms, []string{"p/link-flap"}) {
		t.Fatalf("storms %v, want p/link-flap", storms)
	}
	reasons := map[string]decide.HoldReason{}
	for _, h := range d.Held() {
		reasons[h.Fault.Node] = h.Reason
	}
	for i := 2; i <= 5; i++ {
		if reasons[node(i)] != decide.ReasonFleet {
			t.Errorf("%s held for %q, want fleet (the storm must not take it over)", node(i), reasons[node(i)])
		}
	}
	if reasons[node(6)] != decide.ReasonStorm {
		t.Errorf("%s held for %q, want storm", node(6), reasons[node(6)])
	}
	fl := d.Fleet().Faults()
	if len(fl) != 1 || !slices.Equal(fl[0].Rules, []string{"link-down", "link-flap"}) ||
		fl[0].Severity != rules.SeverityCritical || fl[0].Mode != rules.ModeEnforce {
		t.Fatalf("fleet faults %+v, want one of rules link-down,link-flap, critical, enforce", fl)
	}
	// The rules survive a change of leader.
	next := newDecider(t, cfg, clk)
	next.Fleet().Restore(d.Fleet().State())
	if fl := next.Fleet().Faults(); len(fl) != 1 || !slices.Equal(fl[0].Rules, []string{"link-down", "link-flap"}) {
		t.Errorf("restored fleet faults %+v", fl)
	}
}

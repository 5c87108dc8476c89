package decide_test

import (
	"slices"
	"testing"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/rules"
)

// topoIndex answers the topology questions as an indexed caller would (NodeFacts.Groups).
type topoIndex struct {
	labels map[string]map[string]string
	sizes  map[decide.Group]int
}

func (x topoIndex) Labels(node string) map[string]string { return x.labels[node] }
func (x topoIndex) Size(g decide.Group) int              { return x.sizes[g] }

func indexOf(topology map[string]map[string]string) topoIndex {
	x := topoIndex{labels: topology, sizes: map[decide.Group]int{}}
	for _, ls := range topology {
		for l, v := range ls {
			x.sizes[decide.Group{Label: l, Value: v}]++
		}
	}
	return x
}

// TestFleetFromIndex: facts whose topology comes from an index (Groups, no Topology
// map) decide as the map does: the fleet fault of rack a and the group budget.
func TestFleetFromIndex(t *testing.T) {
	indexed := func() decide.NodeFacts {
		f := rackFacts()
		f.Groups, f.Topology = indexOf(f.Topology), nil
		return f
	}
	t.Run("fleet", func(t *testing.T) {
		d := newDecider(t, fleetConfig(), newClock())
		facts := indexed()
		r := rule("link-flap", rules.ActionTaint)
		var got []string
		for i := range 4 {
			dec := d.Decide(flt(node(i), r), facts)
			applyTaint(facts, dec)
			got = append(got, short(dec))
		}
		if want := []string{"taint", "taint", "hold:fleet", "hold:fleet"}; !slices.Equal(got, want) {
			t.Fatalf("decisions %v, want %v", got, want)
		}
		if fl := d.Fleets(); len(fl) != 1 || fl[0].Group.Value != "a" {
			t.Fatalf("fleet faults %+v, want one for rack a", fl)
		}
	})
	t.Run("group budget", func(t *testing.T) {
		cfg := fleetConfig()
		cfg.Fleet.MinNodes, cfg.Fleet.MinShare, cfg.Fleet.GroupBudget = 100, 1, 50
		d := newDecider(t, cfg, newClock())
		facts := indexed()
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
	})
}

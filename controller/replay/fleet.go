package replay

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
)

// Fleet is the live fleet a replay decides against: the population of the budget
// and the storm hold, the nodes that opted out, and the topology labels that group
// the eligible nodes for fleet correlation.
type Fleet struct {
	Nodes    int             `json:"nodes"`    // all nodes listed
	Eligible int             `json:"eligible"` // matching the selector and not opted out
	OptedOut map[string]bool `json:"optedOut,omitempty"`
	// Grouped counts the eligible nodes with a topology label.
	Grouped int `json:"grouped"`
	// Shard is the label selector of the shard replayed ("": the whole fleet).
	Shard string `json:"shard,omitempty"`
	// owned holds the shard's nodes (nil: every node, known or not, is owned).
	owned map[string]bool
	// groups indexes the eligible nodes' topology values (nil: none grouped).
	groups decide.TopologyIndex
}

// FleetFault is a fleet fault a replay raised: Members of Group hit the rules of
// pack Family within the fleet window, from Since; their taints for the pack were
// held from then to the end of the stretch (a replay gives no verdict).
type FleetFault struct {
	Group     decide.Group `json:"group"`
	Family    string       `json:"family"`
	Since     time.Time    `json:"since"`
	Members   []string     `json:"members"`
	Threshold int          `json:"threshold"`
}

func (f FleetFault) key() string { return f.Group.String() + "\x00" + f.Family }

// maxNodes bounds the node list read (pages of nodePage).
const (
	maxNodes = 200_000
	nodePage = 500
)

// LoadFleet lists the Nodes (get/list only: a replay writes nothing) and indexes
// them with the controller's own index (act.FactIndex): eligible when they match
// eligible (nil: every node) and are not labelled fault.LabelOptOut=true; an
// eligible node's values of the topology labels are its fleet groups. With a shard
// selector (nil: none), only the shard's Nodes are listed, as a sharded
// controller's Node informer lists them, and the lines of other nodes are skipped.
func LoadFleet(ctx context.Context, client kubernetes.Interface, shard, eligible labels.Selector, topology []string) (Fleet, error) {
	idx := act.NewFactIndex(eligible, topology)
	var f Fleet
	opts := metav1.ListOptions{Limit: nodePage}
	if shard != nil {
		f.Shard, opts.LabelSelector = shard.String(), shard.String()
		f.owned = map[string]bool{}
	}
	for {
		l, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return Fleet{}, fmt.Errorf("replay: list nodes: %w", err)
		}
		for i := range l.Items {
			n := &l.Items[i]
			idx.AddNode(n)
			f.Nodes++
			if f.owned != nil {
				f.owned[n.Name] = true
			}
			if len(idx.Labels(n.Name)) > 0 {
				f.Grouped++
			}
		}
		if f.Nodes > maxNodes {
			return Fleet{}, fmt.Errorf("replay: more than %d nodes", maxNodes)
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	facts := idx.Facts()
	f.Eligible, f.OptedOut = facts.Eligible, facts.OptedOut
	if len(topology) > 0 {
		f.groups = idx
	}
	return f, nil
}

// owns reports whether node is the replayed shard's; without a shard every node is.
func (f Fleet) owns(node string) bool { return f.owned == nil || f.owned[node] }

// facts are the decide facts of the fleet before any replayed taint.
func (f Fleet) facts() decide.NodeFacts {
	return decide.NodeFacts{Eligible: f.Eligible, Tainted: map[string][]string{}, OptedOut: f.OptedOut, Groups: f.groups}
}

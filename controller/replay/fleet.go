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
	// Grouped counts the eligible nodes with a topology label; Topology maps each
	// to its values of them (decide.NodeFacts.Topology).
	Grouped  int                          `json:"grouped"`
	Topology map[string]map[string]string `json:"-"`
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

// LoadFleet lists the Nodes (get/list only: a replay writes nothing) and counts them
// as the controller's act stage does: eligible when they match eligible (nil: every
// node) and are not labelled fault.LabelOptOut=true; an eligible node's values of
// the topology labels are its fleet groups.
func LoadFleet(ctx context.Context, client kubernetes.Interface, eligible labels.Selector, topology []string) (Fleet, error) {
	if eligible == nil {
		eligible = labels.Everything()
	}
	f := Fleet{OptedOut: map[string]bool{}}
	opts := metav1.ListOptions{Limit: nodePage}
	for {
		l, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return Fleet{}, fmt.Errorf("replay: list nodes: %w", err)
		}
		for i := range l.Items {
			n := &l.Items[i]
			f.Nodes++
			switch {
			case act.OptedOut(n):
				f.OptedOut[n.Name] = true
			case eligible.Matches(labels.Set(n.Labels)):
				f.Eligible++
				for _, l := range topology {
					if v := n.Labels[l]; v != "" {
						if f.Topology == nil {
							f.Topology = map[string]map[string]string{}
						}
						if f.Topology[n.Name] == nil {
							f.Topology[n.Name] = map[string]string{}
						}
						f.Topology[n.Name][l] = v
					}
				}
			}
		}
		if f.Nodes > maxNodes {
			return Fleet{}, fmt.Errorf("replay: more than %d nodes", maxNodes)
		}
		if l.Continue == "" {
			f.Grouped = len(f.Topology)
			return f, nil
		}
		opts.Continue = l.Continue
	}
}

// facts are the decide facts of the fleet before any replayed taint.
func (f Fleet) facts() decide.NodeFacts {
	return decide.NodeFacts{Eligible: f.Eligible, Tainted: map[string][]string{}, OptedOut: f.OptedOut, Topology: f.Topology}
}

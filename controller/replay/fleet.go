package replay

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
)

// Fleet is the live fleet a replay decides against: the population of the budget
// and the storm hold, and the nodes that opted out.
type Fleet struct {
	Nodes    int             `json:"nodes"`    // all nodes listed
	Eligible int             `json:"eligible"` // matching the selector and not opted out
	OptedOut map[string]bool `json:"optedOut,omitempty"`
}

// maxNodes bounds the node list read (pages of nodePage).
const (
	maxNodes = 200_000
	nodePage = 500
)

// LoadFleet lists the Nodes (get/list only: a replay writes nothing) and counts them
// as the controller's act stage does: eligible when they match eligible (nil: every
// node) and are not labelled fault.LabelOptOut=true.
func LoadFleet(ctx context.Context, client kubernetes.Interface, eligible labels.Selector) (Fleet, error) {
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
			}
		}
		if f.Nodes > maxNodes {
			return Fleet{}, fmt.Errorf("replay: more than %d nodes", maxNodes)
		}
		if l.Continue == "" {
			return f, nil
		}
		opts.Continue = l.Continue
	}
}

// facts are the decide facts of the fleet before any replayed taint.
func (f Fleet) facts() decide.NodeFacts {
	return decide.NodeFacts{Eligible: f.Eligible, Tainted: map[string][]string{}, OptedOut: f.OptedOut}
}

package act

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// shardListOptions restricts the Node informer's list and watch to the shard: the
// apiserver filters, so the other shards' Nodes never reach this process.
func (o Options) shardListOptions(lo *metav1.ListOptions) {
	if o.Shard != nil {
		lo.LabelSelector = o.Shard.String()
	}
}

// Sharded reports whether the Actor acts on one shard of the fleet only.
func (v *View) Sharded() bool { return v.opts.Shard != nil }

// Owns reports whether node belongs to this Actor's shard (is in its Node cache);
// without a shard every node does, known or not, as before sharding.
func (v *View) Owns(node string) bool {
	if v.opts.Shard == nil {
		return true
	}
	_, ok := v.nodes.get(node)
	return ok
}

// ownedFaults lists the records of the shard's nodes: a record of another shard's
// node is that shard's to settle, recover or count.
func (v *View) ownedFaults() []*v1alpha1.NodeFault {
	all := v.faults.List()
	if v.opts.Shard == nil {
		return all
	}
	out := all[:0:0]
	for _, nf := range all {
		if v.Owns(nf.Spec.Node) {
			out = append(out, nf)
		}
	}
	return out
}

// HeldRecords returns the records of node in phase Held, from the cache: a node
// that joined the shard brings the faults its previous shard held for it.
func (v *View) HeldRecords(node string) []*v1alpha1.NodeFault {
	var out []*v1alpha1.NodeFault
	for _, nf := range v.faults.ForNode(node) {
		if nf.Status.Phase == v1alpha1.PhaseHeld {
			out = append(out, nf)
		}
	}
	return out
}

// OnMembership calls f(node, true) when a node enters the shard after the initial
// list (labelled into it, or created), and f(node, false) when one leaves it
// (relabelled away, or deleted). f must not block: the informer waits on it.
func (v *View) OnMembership(f func(node string, joined bool)) error {
	name := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if c, ok := obj.(*cachedNode); ok {
			return c.name
		}
		return ""
	}
	_, err := v.nodeInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if n := name(obj); n != "" && !initial {
				f(n, true)
			}
		},
		DeleteFunc: func(obj any) {
			if n := name(obj); n != "" {
				f(n, false)
			}
		},
	})
	return err
}

package act

import (
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// NodeFaults returns every NodeFault in the actor's informer cache (node and fleet
// faults, every phase). They are shared: do not modify them.
func (v *View) NodeFaults() []*v1alpha1.NodeFault { return v.faults.List() }

// OnRequest calls f when a record carries an operator's request not answered yet
// (spec.request new or changed), so that it is answered at once rather than at the
// next pass.
func (v *View) OnRequest(f func()) error {
	pending := func(obj any) {
		if nf, ok := obj.(*v1alpha1.NodeFault); ok && nf.Pending() {
			f()
		}
	}
	_, err := v.faults.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: pending, UpdateFunc: func(_, obj any) { pending(obj) }})
	return err
}

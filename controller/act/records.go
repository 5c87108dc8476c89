package act

import "github.com/faultline-dev/faultline/api/v1alpha1"

// NodeFaults returns every NodeFault in the actor's informer cache (node and fleet
// faults, every phase). They are shared: do not modify them.
func (v *View) NodeFaults() []*v1alpha1.NodeFault { return v.faults.List() }

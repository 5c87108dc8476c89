package nodefault

import (
	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// Workloads says which pods a fault touched (Options.Workloads). The Store asks it
// once per episode of a fault: on the write that records the fault's first firing,
// or reopens a Resolved record; later repeats leave the list as it was.
type Workloads interface {
	// OnNode lists the pods holding node's GPUs now; nil when it cannot tell (its
	// cache has not synced).
	OnNode(node string) *v1alpha1.AffectedPods
	// Recorded is told of each record written with a list OnNode gave, once the
	// write succeeded: once per episode.
	Recorded(nf *v1alpha1.NodeFault)
}

// touch records the pods a fault touched in st when c opens an episode of it, and
// says whether it did.
func (s *Store) touch(st *v1alpha1.NodeFaultStatus, c Change) bool {
	if c.Fault == nil {
		return false
	}
	reopened := st.Phase == v1alpha1.PhaseResolved && c.Phase != "" && c.Phase != v1alpha1.PhaseResolved
	if reopened {
		st.Affected = nil // the last episode's
	}
	if s.opts.Workloads == nil || (st.FirstSeen != nil && !reopened) {
		return false
	}
	st.Affected = s.opts.Workloads.OnNode(c.Fault.Node)
	return st.Affected != nil
}

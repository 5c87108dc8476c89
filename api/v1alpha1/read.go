package v1alpha1

import "time"

// PackRule names the fault's rule as pack/rule.
func (nf *NodeFault) PackRule() string { return nf.Spec.Pack + "/" + nf.Spec.Rule }

// OwnsTaint reports whether the record says faultline placed the fault's taint, or
// is placing it (the Node update may have happened).
func (s *NodeFaultStatus) OwnsTaint() bool {
	return s.Taint != nil && (s.Taint.State == TaintPlaced || s.Taint.State == TaintPlacing)
}

// Seen is when the fault was last seen: its last firing's line or, for a record no
// firing has written yet, the time of its taint entry; zero when neither is known.
func (s *NodeFaultStatus) Seen() time.Time {
	switch {
	case s.LastSeen != nil:
		return s.LastSeen.Time
	case s.Taint != nil:
		return s.Taint.Time.Time
	}
	return time.Time{}
}

package act

import (
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
)

// Unconfirmed returns f with its rule's taint value set to
// v1alpha1.UnconfirmedTaintValue (the rule itself is not changed): TaintNode then
// places, or keeps, the unconfirmed taint.
func Unconfirmed(f fault.Fault) fault.Fault {
	if f.Rule == nil {
		return f
	}
	r := *f.Rule
	r.Taint.Value = v1alpha1.UnconfirmedTaintValue
	f.Rule = &r
	return f
}

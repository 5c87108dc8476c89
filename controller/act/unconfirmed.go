package act

import (
	"github.com/faultline-dev/faultline/controller/fault"
)

// UnconfirmedValue is the value of a rule's taint placed unconfirmed: the rule's
// key and effect (so the budget, the untaint and the records treat it as the rule's
// taint) with a value that says its probe is not done. Its invasive checks wait for
// the node's GPUs; a failure puts the rule's own value in its place, a pass
// removes it.
const UnconfirmedValue = "unconfirmed"

// Unconfirmed returns f with its rule's taint value set to UnconfirmedValue (the
// rule itself is not changed): TaintNode then places, or keeps, the unconfirmed
// taint.
func Unconfirmed(f fault.Fault) fault.Fault {
	if f.Rule == nil {
		return f
	}
	r := *f.Rule
	r.Taint.Value = UnconfirmedValue
	f.Rule = &r
	return f
}

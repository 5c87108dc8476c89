package steps

import (
	"context"

	"github.com/faultline-dev/faultline/rules/stepspec"
)

// The taint step places the rule's taint: a ladder that starts below a taint (a
// probe rule) climbs to it. Its budget grant was taken when it was decided; a taint
// not placed gives it back.
func init() { Register(stepspec.Taint, taint) }

func taint(ctx context.Context, d Deps, t Target) (Result, error) {
	f := t.Fault
	boot, _ := d.Nodes.BootID(f.Node)
	if _, err := d.Nodes.TaintNode(ctx, f, boot); err != nil {
		d.NotApplied(f)
		return Result{}, err
	}
	return Done("tainted " + f.Rule.Taint.Key + "=" + f.Rule.Taint.Value + ":" + f.Rule.Taint.Effect), nil
}

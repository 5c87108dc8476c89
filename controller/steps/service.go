package steps

import (
	"context"
	"fmt"

	"github.com/faultline-dev/faultline/controller/act"
)

// The service step hands the node to the hardware team: the label
// faultline.io/service=required and the condition FaultlineService with the rule
// and the evidence (act.MarkForService). It takes no capacity: the node is tainted
// already.
func init() { Register("service", service) }

func service(ctx context.Context, d Deps, t Target) (Result, error) {
	f := t.Fault
	msg := fmt.Sprintf("%s (%s) escalated to service: %s; %s", f.Rule, f.Rule.Severity, t.Step.Why, f.LastLine())
	if err := d.Nodes.MarkForService(ctx, f.Node, msg); err != nil {
		return Result{}, err
	}
	return Done("labelled " + act.LabelService + "=required, condition " + act.ConditionService + " set"), nil
}

package act

import (
	"context"

	"github.com/faultline-dev/faultline/controller/fault"
)

// Taint places the fault's taint (f.Rule.Taint) on node f.Node and records the
// evidence in the annotation; see TaintNode.
func (a *Actor) Taint(ctx context.Context, f fault.Fault, bootID string) error {
	_, err := a.TaintNode(ctx, f, bootID)
	return err
}

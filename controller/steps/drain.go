package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/controller/act"
)

// The drain step evicts the node's pods with kubectl's drain helper (act.Drain)
// through the Eviction API. A PodDisruptionBudget that blocks an eviction, or
// evicted pods still terminating, make it wait; it does not cordon (the rule's
// taint keeps the pods away).
func init() { Register("drain", drain) }

func drain(ctx context.Context, d Deps, t Target) (Result, error) {
	res, err := d.Nodes.Drain(ctx, t.Fault.Node, act.DrainOptions{Timeout: d.DrainTimeout, GracePeriodSeconds: d.DrainGraceSeconds,
		Log: d.Log.With("rule", t.Fault.Rule.String())})
	if errors.Is(err, act.ErrDrainBlocked) || errors.Is(err, act.ErrDrainTerminating) {
		return Waiting(fmt.Sprintf("evicted %d pod(s); waiting: %v", len(res.Evicted), err)), nil
	}
	if err != nil {
		return Result{}, err
	}
	msg := fmt.Sprintf("drained: %d pod(s) evicted", len(res.Evicted))
	if len(res.Evicted) > 0 {
		msg += " (" + strings.Join(res.Evicted, ", ") + ")"
	}
	return Done(msg), nil
}

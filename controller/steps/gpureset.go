package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/controller/trigger"
)

// The gpu-reset step has the node's probe agent reset the fault's GPUs while no
// container holds them (else it waits), then runs the rule's confirming probes
// again; their verdict feeds a probeFailed step after it.
func init() { Register("gpu-reset", gpuReset) }

func gpuReset(ctx context.Context, d Deps, t Target) (Result, error) {
	r, err := d.GPUs.ResetGPUs(ctx, t.Fault)
	if errors.Is(err, trigger.ErrGPUsBusy) {
		return Waiting(err.Error()), nil
	}
	if err != nil {
		return Result{}, err
	}
	return Done(fmt.Sprintf("%s; confirming probes %s %s: %s", r.Message, strings.Join(r.Checks, ","), r.Verdict, r.Summary)), nil
}

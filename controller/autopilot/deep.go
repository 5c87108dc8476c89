package autopilot

import (
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// DeepEvery is the default interval of the periodic deep checks: Autopilot's
// documentation says its invasive checks run every 4 hours by default.
const DeepEvery = 4 * time.Hour

// DeepChecks are the periodic deep checks, with their parameters: DCGM's level 3
// diagnostic, PCIe bandwidth and DGEMM, all invasive, so they run only on a node
// whose GPUs no container holds.
func DeepChecks() ([]string, map[string]probe.Params) {
	return []string{probe.DCGMCheck, probe.PCIeBWCheck, probe.DGEMMCheck},
		map[string]probe.Params{probe.DCGMCheck: {"level": "3"}}
}

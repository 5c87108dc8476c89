package packs_test

import (
	"testing"

	"github.com/faultline-dev/faultline/rules/packs"
)

// awaitingSources lists the default rules that do not cite a format string yet:
// rules for lines whose printing code is not in a file the inventory has read
// (CUDA and PyTorch strings, Fabric Manager, systemd, multi-line libata and SCSI
// sense decoding, driver-specific link messages). The list may only shrink: a
// listed rule that gains sources, or disappears, fails the test.
var awaitingSources = map[string]bool{
	"nvidia-xid/xid-nvlink5-fatal":             true,
	"nvidia-xid/xid-nvlink5-nonfatal":          true,
	"nvidia-driver/device-open-failed":         true,
	"nvidia-driver/gsp-rpc-timeout":            true,
	"nvidia-driver/gsp-crash-detail":           true,
	"nvidia-driver/gpu-reset-required":         true,
	"nvidia-driver/rc-watchdog":                true,
	"nvidia-driver/driver-assertion":           true,
	"nvidia-driver/sxid-non-fatal":             true,
	"nvidia-driver/fabric-manager-down":        true,
	"nvidia-driver/fabric-manager-exit":        true,
	"nvidia-driver/fabric-manager-error":       true,
	"nvidia-driver/display-driver-error":       true,
	"pcie-aer/aer-corrected-storm":             true,
	"pcie-aer/aer-error-bit":                   true,
	"pcie-aer/aer-error-detail":                true,
	"pcie-aer/dpc-detail":                      true,
	"pcie-aer/pcie-bandwidth-insufficient-nic": true,
	"pcie-aer/pcie-link-retrain":               true,
	"pcie-aer/pciehp-link-down":                true,
	"network/ib-port-down":                     true,
	"network/link-flap":                        true,
	"network/ib-completion-error":              true,
	"storage/scsi-medium-error":                true,
	"storage/scsi-error-detail":                true,
	"kernel/mce-detail":                        true,
	"kernel/mce-amd-uncorrected":               true,
	"kernel/edac-deferred":                     true,
	"kernel/edac-mce-context":                  true,
	"kernel/ghes-header":                       true,
	"kernel/ghes-context":                      true,
	"kernel/kernel-bug":                        true,
	"kernel/kernel-report-context":             true,
	"training-pods/nccl-watchdog-timeout":      true,
	"training-pods/nccl-comm-aborted":          true,
	"training-pods/nccl-watchdog-terminated":   true,
	"training-pods/nccl-watchdog-hang":         true,
	"training-pods/nccl-watchdog-context":      true,
	"training-pods/nccl-test-failure":          true,
	"training-pods/nccl-error-usage":           true,
	"training-pods/nccl-error-cuda":            true,
	"training-pods/nccl-error-remote":          true,
	"training-pods/nccl-error":                 true,
	"training-pods/nccl-warn-config":           true,
	"training-pods/torch-distributed-error":    true,
	"training-pods/nccl-error-trace":           true,
}

// TestDefaultRulesCiteSources fails when a default rule cites no format string of
// the program that prints its lines, unless it is awaiting one above.
func TestDefaultRulesCiteSources(t *testing.T) {
	e, err := packs.Engine()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range e.Set().Rules {
		name := r.String()
		seen[name] = true
		switch {
		case len(r.Sources) == 0 && !awaitingSources[name]:
			t.Errorf("%s (%s:%d) cites no source: add sources (docs/rules.md)", name, r.File, r.Line)
		case len(r.Sources) > 0 && awaitingSources[name]:
			t.Errorf("%s now cites sources: remove it from awaitingSources", name)
		}
	}
	for name := range awaitingSources {
		if !seen[name] {
			t.Errorf("awaitingSources lists %s, which is not a default rule", name)
		}
	}
}

package packs_test

import (
	"testing"

	"github.com/faultline-dev/faultline/rules/packs"
)

// awaitingSources lists the default rules that do not cite a format string yet,
// each with why: the line is not printed by a printf-style format (PyTorch's string
// building, SCSI sense decoding), comes from a program whose source is not public
// (Fabric Manager), or has not been traced to a file yet. The list may only
// shrink: a listed rule that gains sources, or disappears, fails the test.
var awaitingSources = map[string]string{
	"nvidia-xid/xid-nvlink5-fatal":             "the NVLink5 Xid texts are not yet traced to a format string of the open modules",
	"nvidia-xid/xid-nvlink5-nonfatal":          "the NVLink5 Xid texts are not yet traced to a format string of the open modules",
	"nvidia-driver/device-open-failed":         "no format string of open-gpu-kernel-modules 595.45.04 prints nvidia_frontend_open (the frontend module is gone)",
	"nvidia-driver/gsp-rpc-timeout":            "printed by NV_ERROR_LOG_DATA (portDbgPrintf with a function prefix), a call the source tester does not model yet",
	"nvidia-driver/gsp-crash-detail":           "CrashCat report lines are printed by CRASHCAT_REPORT_LOG_PACKET_TYPE, a call the source tester does not model yet",
	"nvidia-driver/gpu-reset-required":         "status names (NV_ERR_RESET_REQUIRED) are substituted into many formats by nvstatusToString; no one format states them",
	"nvidia-driver/sxid-non-fatal":             "printed by the NVSWITCH_PRINT_SXID macro (nvswitch_os_print, format joined across two headers), not modelled yet",
	"nvidia-driver/fabric-manager-down":        "Fabric Manager's source is not public",
	"nvidia-driver/fabric-manager-exit":        "Fabric Manager's source is not public",
	"nvidia-driver/fabric-manager-error":       "Fabric Manager's source is not public",
	"nvidia-driver/display-driver-error":       "lines of the closed X driver and of nvidia-modeset/nvidia-drm, not yet traced",
	"pcie-aer/aer-corrected-storm":             "the older \"Corrected error received\" wording of pre-5.x aer.c; no older tag read yet",
	"pcie-aer/aer-error-bit":                   "aer.c's error-bit format (level and prefix passed as %s) not yet cited",
	"pcie-aer/aer-error-detail":                "aer.c's register-dump formats not yet cited",
	"pcie-aer/dpc-detail":                      "the older dpc.c wording (\"DPC: unmasked uncorrectable error detected\"); no older tag read yet",
	"pcie-aer/pcie-bandwidth-insufficient-nic": "per-driver NIC messages (ixgbe, i40e, ...) not yet cited",
	"network/ib-port-down":                     "the mlx5 IB \"Port: %d Link %s\" format is not in a file read yet",
	"network/link-flap":                        "a companion rule (a link up before the down): the source tester feeds one format at a time, so one down line cannot fire it",
	"network/ib-completion-error":              "strings of NCCL, UCX, perftest and rdma-core examples, not yet cited",
	"storage/scsi-medium-error":                "scsi_logging.c builds the line from scnprintf pieces and prints \"%s\"; no one format states it",
	"storage/scsi-error-detail":                "scsi_logging.c builds the line from scnprintf pieces and prints \"%s\"; no one format states it",
	"kernel/edac-deferred":                     "the \"Deferred\" type string is passed into edac_mc.c's format by amd64_edac; not yet cited",
	"kernel/edac-mce-context":                  "per-driver EDAC decoder lines (skx, sbridge, i10nm), not yet cited",
	"training-pods/nccl-watchdog-timeout":      "PyTorch builds the message with c10::str and streams (ProcessGroupNCCL.cpp), not a printf format",
	"training-pods/nccl-comm-aborted":          "PyTorch builds the message with c10::str and streams (ProcessGroupNCCL.cpp), not a printf format",
	"training-pods/nccl-watchdog-terminated":   "PyTorch builds the message with c10::str and streams (ProcessGroupNCCL.cpp), not a printf format",
	"training-pods/nccl-watchdog-hang":         "PyTorch builds the message with c10::str and streams (ProcessGroupNCCL.cpp), not a printf format",
	"training-pods/nccl-watchdog-context":      "PyTorch builds the message with c10::str and streams (ProcessGroupNCCL.cpp), not a printf format",
	"training-pods/nccl-test-failure":          "nccl-tests' failure printf not yet cited",
	"training-pods/nccl-error-usage":           "PyTorch's \"NCCL error in: \" + __FILE__ + ... concatenation (NCCLUtils.hpp) around ncclGetErrorString, not a printf format",
	"training-pods/nccl-error-cuda":            "PyTorch's \"NCCL error in: \" + __FILE__ + ... concatenation (NCCLUtils.hpp) around ncclGetErrorString, not a printf format",
	"training-pods/nccl-error-remote":          "PyTorch's \"NCCL error in: \" + __FILE__ + ... concatenation (NCCLUtils.hpp) around ncclGetErrorString, not a printf format",
	"training-pods/nccl-error":                 "PyTorch's \"NCCL error in: \" + __FILE__ + ... concatenation (NCCLUtils.hpp) around ncclGetErrorString, not a printf format",
	"training-pods/nccl-warn-config":           "RCCL-only WARN lines (ROCm/rccl), not yet cited",
	"training-pods/torch-distributed-error":    "Python exception class names, not a printed format",
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
		case len(r.Sources) == 0 && awaitingSources[name] == "":
			t.Errorf("%s (%s:%d) cites no source: add sources (docs/rules.md)", name, r.File, r.Line)
		case len(r.Sources) > 0 && awaitingSources[name] != "":
			t.Errorf("%s now cites sources: remove it from awaitingSources", name)
		}
	}
	for name := range awaitingSources {
		if !seen[name] {
			t.Errorf("awaitingSources lists %s, which is not a default rule", name)
		}
	}
}

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
	"nvidia-driver/device-open-failed":      "no format string of open-gpu-kernel-modules 595.45.04 prints nvidia_frontend_open (the frontend module is gone)",
	"nvidia-driver/fabric-manager-down":     "Fabric Manager's source is not public",
	"nvidia-driver/fabric-manager-exit":     "Fabric Manager's source is not public",
	"nvidia-driver/fabric-manager-error":    "Fabric Manager's source is not public",
	"kernel/edac-deferred":                  "the \"Deferred\" type string is passed into edac_mc.c's format by amd64_edac; not yet cited",
	"training-pods/nccl-comm-aborted":       "PyTorch builds the message with c10::str and streams (ProcessGroupNCCL.cpp), not a printf format",
	"training-pods/nccl-watchdog-hang":      "PyTorch builds the message with c10::str and streams (ProcessGroupNCCL.cpp), not a printf format",
	"training-pods/torch-distributed-error": "Python exception class names, not a printed format",
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

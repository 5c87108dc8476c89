package main

import (
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/controller/autopilot"
)

// A --probe-schedule entry is an interval and the check's parameters as a query
// string, checked against the check's schema when the flag is read.
func TestParseSchedule(t *testing.T) {
	s, err := parseSchedule("nvml", "2h?expected_gpus=8&pcie_width_action=warn", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Check != "nvml" || s.Every != 2*time.Hour || s.Params.String("expected_gpus") != "8" || s.Params.String("pcie_width_action") != "warn" {
		t.Errorf("parsed %+v", s)
	}
	if s, err := parseSchedule("nvml", "1h", nil); err != nil || s.Params != nil || s.Every != time.Hour {
		t.Errorf("no parameters: %+v, %v", s, err)
	}
	if s, err := parseSchedule("dcgm", "0", nil); err != nil || s.Every != 0 {
		t.Errorf("0 turns a check off: %+v, %v", s, err)
	}
	for _, tc := range []struct{ check, v, want string }{
		{"nvml", "1h?expected_gpus=65", "expected_gpus"},
		{"nvml", "1h?expected_gpu=8", "unknown parameter"},
		{"nvml", "1h?expected_gpus=8&expected_gpus=4", "given 2 times"},
		{"nvml", "30s", "at least 1m"},
		{"nvml", "hourly?expected_gpus=8", "at least 1m"},
		{"nvml", "1h?expected_gpus=%zz", "parameters"},
		{"no-such-check", "1h", "unknown check"},
		{"remapped", "1h", "unknown check"}, // Autopilot's names only with --autopilot-compat
	} {
		_, err := parseSchedule(tc.check, tc.v, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: err %v, want %q", tc.check, tc.v, err, tc.want)
		}
	}
}

// With --autopilot-compat a schedule may name Autopilot's checks: their parameters
// are checked against the schema of the check they stand for, with the alias's own.
func TestParseScheduleAutopilotNames(t *testing.T) {
	aliases := autopilot.Aliases()
	s, err := parseSchedule("gpupower", "30m?throttle_action=warn", aliases)
	if err != nil || s.Check != "gpupower" || s.Every != 30*time.Minute || s.Params.String("throttle_action") != "warn" {
		t.Errorf("gpupower: %+v, %v", s, err)
	}
	if _, err := parseSchedule("remapped", "1h?part=bogus", aliases); err == nil || !strings.Contains(err.Error(), "part") {
		t.Errorf("remapped with a bad part: %v", err)
	}
}

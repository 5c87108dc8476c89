package autopilot

import (
	"regexp"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The node labels and the annotation Autopilot writes. Autopilot's documentation
// says: autopilot.ibm.com/gpuhealth is PASS when the health checks pass, WARN when
// the periodic checks report an issue, TESTING while the invasive checks run and
// EVICT for a fatal error; autopilot.ibm.com/dcgm.level.3 is the result and time of
// the latest DCGM level 3 run (PASS_... or ERR_...), and the annotation
// autopilot.ibm.com/dcgm.level.3.output lists the tests that failed on which GPU.
const (
	LabelGPUHealth             = "autopilot.ibm.com/gpuhealth"
	LabelDCGMLevel3            = "autopilot.ibm.com/dcgm.level.3"
	AnnotationDCGMLevel3Output = "autopilot.ibm.com/dcgm.level.3.output"
)

// Values of LabelGPUHealth.
const (
	GPUHealthPass    = "PASS"
	GPUHealthWarn    = "WARN"
	GPUHealthTesting = "TESTING"
	GPUHealthEvict   = "EVICT"
)

// GPUHealth is a node's autopilot.ibm.com/gpuhealth value, in precedence order:
// EVICT when the node carries a faultline taint of a confirmed fault (evict);
// TESTING while an invasive check runs there (deep); else from the worst latest
// probe result (worst, faultline's health without its TESTING: PASS, WARN or
// FAIL): WARN for a check that failed, warned or reached no verdict, PASS when all
// passed. "" when nothing is known: the label is then left as it is.
func GPUHealth(worst string, deep, evict bool) string {
	switch {
	case evict:
		return GPUHealthEvict
	case deep:
		return GPUHealthTesting
	case worst == "":
		return ""
	case worst == "PASS":
		return GPUHealthPass
	}
	return GPUHealthWarn
}

// dcgmTime is the time format of LabelDCGMLevel3's value, as Autopilot's
// documentation shows it (ERR_2024-10-10_19.12.03UTC).
const dcgmTime = "2006-01-02_15.04.05UTC"

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// DCGMLevel3 is the LabelDCGMLevel3 value and the AnnotationDCGMLevel3Output of a
// dcgm level 3 result finished at `at`: PASS_<time> and no output when no test
// failed (a warning is no error), else ERR_<time> and, for each failed test, its
// name (lower case, words joined by _) and the GPUs it failed on, dot-separated
// (memory_bandwidth.0.1), the tests comma-separated. ok is false for a result that
// reached no verdict (error, skipped): the labels stay as they were.
func DCGMLevel3(r probe.Result, at time.Time) (label, output string, ok bool) {
	stamp := at.UTC().Format(dcgmTime)
	switch r.Status {
	case probe.StatusPass, probe.StatusWarn:
		return "PASS_" + stamp, "", true
	case probe.StatusFail:
	default:
		return "", "", false
	}
	var tests []string
	gpus := map[string][]string{}
	for _, d := range r.Devices {
		for _, t := range d.Failed {
			name := strings.Trim(nonWord.ReplaceAllString(strings.ToLower(t), "_"), "_")
			if _, seen := gpus[name]; !seen {
				tests = append(tests, name)
			}
			gpus[name] = append(gpus[name], d.ID)
		}
	}
	parts := make([]string, 0, len(tests))
	for _, t := range tests {
		parts = append(parts, strings.Join(append([]string{t}, gpus[t]...), "."))
	}
	return "ERR_" + stamp, strings.Join(parts, ","), true
}

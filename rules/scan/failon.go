package scan

import (
	"fmt"

	"github.com/faultline-dev/faultline/rules"
)

// FailOn is the level of firing that makes `faultline scan --fail-on` exit non-zero.
type FailOn string

// Levels of --fail-on, strictest first.
const (
	// FailOnTaint: a rule whose action is taint fired.
	FailOnTaint FailOn = "taint"
	// FailOnEvent: a rule whose action is taint, probe or event fired (scan cannot
	// run probes, so a probe rule counts as the event it would also record).
	FailOnEvent FailOn = "event"
	// FailOnWarning: a rule of severity warning or critical fired, whatever its action.
	FailOnWarning FailOn = "warning"
)

var failLevels = []FailOn{FailOnTaint, FailOnEvent, FailOnWarning}

// ParseFailOn checks a --fail-on value; empty means never fail.
func ParseFailOn(s string) (FailOn, error) {
	if s == "" {
		return "", nil
	}
	for _, lv := range failLevels {
		if string(lv) == s {
			return lv, nil
		}
	}
	return "", fmt.Errorf("--fail-on must be taint, event or warning, not %q", s)
}

func (lv FailOn) reached(r *rules.Compiled) bool {
	switch lv {
	case FailOnTaint:
		return r.Action == rules.ActionTaint
	case FailOnEvent:
		return r.Action == rules.ActionTaint || r.Action == rules.ActionProbe || r.Action == rules.ActionEvent
	case FailOnWarning:
		return r.Severity.Rank() >= rules.SeverityWarning.Rank()
	}
	return false
}

// Failed reports whether a rule fired at level lv or above; false for the empty level.
func (s *Scanner) Failed(lv FailOn) bool { return lv != "" && s.Stats.Fired[lv] > 0 }

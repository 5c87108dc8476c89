package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/rules"
)

// ActiveFault is a fault in force on a node: its NodeFault record and the rule as
// loaded now.
type ActiveFault struct {
	Node string
	// Rule is the rule as currently loaded; nil when no loaded rule has this key any
	// more, in which case the policy recorded in Record.Status.Recover applies.
	Rule *rules.Compiled
	// Record is the fault's NodeFault (read-only: the informer's copy).
	Record *v1alpha1.NodeFault
	// ProbesPassed is when the rule's recovery probes (Recover.Probes) last all
	// passed on the node; zero when they have not (or nobody ran them). Only a pass
	// after the fault and after its last match counts.
	ProbesPassed time.Time
}

// Recoverable applies the fault's recovery policy and says whether its taint may be
// removed now, and why (or what it waits for):
//
//   - manual (also the policy of a rule without one): never automatically; an
//     operator runs `faultline untaint`.
//   - after D: no match of the rule on the node for D (since lastMatch, or since the
//     fault's time when lastMatch is zero or older).
//   - on reboot: the node's boot id differs from the one recorded in the evidence.
//   - after and on reboot are alternatives: either one suffices.
//   - probes: a recovery also needs the recovery probes to have passed after the
//     fault and its last match (ActiveFault.ProbesPassed); a policy with probes
//     only recovers as soon as they pass.
//
// The policy is the loaded rule's (operators may change it) or, when the rule is
// gone, the one recorded in the evidence. now zero means the Decider's clock.
//
// Recoverable deliberately consults neither the budget nor the storm state: a
// breaker that freezes recoveries too keeps healed nodes out of the fleet.
func (d *Decider) Recoverable(a ActiveFault, now time.Time, nodeBootID string, lastMatch time.Time) (bool, string) {
	if now.IsZero() {
		now = d.now()
	}
	ok, why := recoverable(a, now, nodeBootID, lastMatch)
	if ok && d.cfg.DryRun {
		// Dry-run changes no Node, recoveries included.
		return false, "dry-run: would untaint: " + why
	}
	return ok, why
}

func recoverable(a ActiveFault, now time.Time, nodeBootID string, lastMatch time.Time) (bool, string) {
	var pol rules.Recover
	if a.Rule != nil {
		pol = a.Rule.Recover
	} else {
		p, ok := ParseRecover(a.Record.Status.Recover)
		if !ok {
			return false, fmt.Sprintf("rule no longer loaded and its recorded policy %q is not understood: untaint manually", a.Record.Status.Recover)
		}
		pol = p
	}
	if pol.Manual || (pol.After <= 0 && !pol.OnReboot && len(pol.Probes) == 0) {
		return false, "recover: manual; remove the taint with faultline untaint"
	}
	since := a.Record.Status.Seen()
	if lastMatch.After(since) {
		since = lastMatch
	}
	var met string
	var waits []string
	if pol.After > 0 {
		if due := since.Add(pol.After.D()); !now.Before(due) {
			met = fmt.Sprintf("no match for %s (last at %s)", pol.After.D(), since.Format(time.RFC3339))
		} else {
			waits = append(waits, fmt.Sprintf("no match until %s", due.Format(time.RFC3339)))
		}
	}
	if met == "" && pol.OnReboot {
		switch {
		case a.Record.Status.BootID == "":
			waits = append(waits, "a reboot (no boot id was recorded with the fault)")
		case nodeBootID == "":
			waits = append(waits, "a reboot (the node's boot id is unknown)")
		case nodeBootID != a.Record.Status.BootID:
			met = fmt.Sprintf("node rebooted (boot id %s, was %s)", nodeBootID, a.Record.Status.BootID)
		default:
			waits = append(waits, "a reboot")
		}
	}
	if pol.After <= 0 && !pol.OnReboot {
		met = "recovery probes"
	}
	if met == "" {
		return false, "waiting for " + strings.Join(waits, " or ")
	}
	if len(pol.Probes) > 0 {
		if !a.ProbesPassed.After(since) {
			return false, fmt.Sprintf("%s, but waiting for probes %v to pass after %s", met, pol.Probes, since.Format(time.RFC3339))
		}
		if met == "recovery probes" {
			met = ""
		} else {
			met += "; "
		}
		met += fmt.Sprintf("probes %v passed at %s", pol.Probes, a.ProbesPassed.Format(time.RFC3339))
	}
	return true, met
}

// ParseRecover parses a policy as rules.Recover.String renders it ("manual",
// "after 24h", "on reboot", "when probes [pciebw] pass", joined by ", ").
func ParseRecover(s string) (rules.Recover, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "manual" {
		return rules.Recover{Manual: true}, s != ""
	}
	var r rules.Recover
	for _, part := range strings.Split(s, ", ") {
		switch {
		case strings.HasPrefix(part, "after "):
			dur, err := time.ParseDuration(strings.TrimPrefix(part, "after "))
			if err != nil || dur <= 0 {
				return rules.Recover{}, false
			}
			r.After = rules.Duration(dur)
		case part == "on reboot":
			r.OnReboot = true
		case strings.HasPrefix(part, "when probes [") && strings.HasSuffix(part, "] pass"):
			list := strings.TrimSuffix(strings.TrimPrefix(part, "when probes ["), "] pass")
			r.Probes = strings.Fields(list)
			if len(r.Probes) == 0 {
				return rules.Recover{}, false
			}
		default:
			return rules.Recover{}, false
		}
	}
	return r, true
}

package rules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/rules"
)

// TestEscalateCompiles: a ladder is read in order with its triggers, and an
// override replaces it.
func TestEscalateCompiles(t *testing.T) {
	base := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: base}
spec:
  defaults: {severity: critical, action: taint}
  rules:
    - id: xid
      match: {regex: 'Xid'}
      escalate:
        - {action: drain, repeat: {count: 2, window: 1h}}
        - {action: remediate, reboots: 1, template: self-node}
        - {action: service, taintedFor: 24h}
`
	set, err := compile(t, base)
	if err != nil {
		t.Fatal(err)
	}
	steps := set.Rules[0].Escalate
	if len(steps) != 3 || steps[0].Action != rules.StepDrain || steps[0].Repeat.Count != 2 ||
		steps[0].Repeat.Window.D() != time.Hour || steps[1].Reboots != 1 || steps[1].Template != "self-node" ||
		steps[2].TaintedFor.D() != 24*time.Hour {
		t.Fatalf("ladder read as %+v", steps)
	}
	site := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: xid
      escalate:
        - {action: service, taintedFor: 1h}
`
	set, err = compile(t, base, site)
	if err != nil {
		t.Fatal(err)
	}
	if s := set.Rules[0].Escalate; len(s) != 1 || s[0].Action != rules.StepService {
		t.Fatalf("override gave %+v", s)
	}
	if !rules.StepDrain.TakesCapacity() || rules.StepService.TakesCapacity() {
		t.Error("TakesCapacity: drain must take capacity, service must not")
	}
}

// TestEscalateErrors: a bad ladder is refused with its file, line and rule.
func TestEscalateErrors(t *testing.T) {
	for _, c := range []struct{ name, rule, want string }{
		{"no trigger", `{action: drain}`, "a.yaml:9:18: pack \"base\": rule \"x\": escalate step 1: set exactly one trigger"},
		{"two triggers", `{action: drain, reboots: 1, taintedFor: 1h}`, "a.yaml:9:18: pack \"base\": rule \"x\": escalate step 1: set exactly one trigger of repeat, reboots, probeFailed, taintedFor (found 2)"},
		{"bad action", `{action: reboot, reboots: 1}`, "a.yaml:9:27: pack \"base\": rule \"x\": escalate step 1: action must be one of"},
		{"no action", `{reboots: 1}`, "escalate step 1: action is not set"},
		{"repeat no window", `{action: drain, repeat: {count: 2}}`, "escalate step 1: repeat window must be set"},
		{"remediate no template", `{action: remediate, reboots: 1}`, "remediate needs template"},
		{"template elsewhere", `{action: drain, reboots: 1, template: x}`, "template is only for action remediate"},
		{"probeFailed without probe", `{action: gpu-reset, probeFailed: true}`, "probeFailed needs the rule's probe.checks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: base}
spec:
  defaults: {severity: critical, action: taint}
  rules:
    - id: x
      match: {regex: 'Xid'}
      escalate: [` + c.rule + `]
`
			_, err := compile(t, doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	event := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: base}
spec:
  defaults: {severity: warning, action: event}
  rules:
    - id: x
      match: {regex: 'Xid'}
      escalate: [{action: service, reboots: 1}]
`
	if _, err := compile(t, event); err == nil || !strings.Contains(err.Error(), "escalate needs action taint or probe") {
		t.Fatalf("an event rule's ladder: %v", err)
	}
	soft := strings.Replace(event, "action: event}", "action: taint, taint: {effect: PreferNoSchedule}}", 1)
	soft = strings.Replace(soft, "{action: service, reboots: 1}", "{action: drain, reboots: 1}", 1)
	if _, err := compile(t, soft); err == nil || !strings.Contains(err.Error(), "drain needs a taint that keeps pods away") {
		t.Fatalf("a drain under a PreferNoSchedule taint: %v", err)
	}
}

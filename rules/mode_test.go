package rules_test

import (
	"testing"

	"github.com/faultline-dev/faultline/rules"
)

// TestModes: a rule's mode is its own, else its pack's default, else enforce; an
// override patches it; Cap lowers it to a ceiling and never raises it.
func TestModes(t *testing.T) {
	base := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: base}
spec:
  defaults: {severity: critical, action: taint, mode: annotate}
  rules:
    - id: from-pack
      match: {regex: 'one'}
    - id: own
      mode: observe
      match: {regex: 'two'}
    - id: patched
      match: {regex: 'three'}
`
	plain := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: plain}
spec:
  defaults: {severity: critical, action: taint}
  rules:
    - id: unset
      match: {regex: 'four'}
`
	site := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: patched
      mode: enforce
`
	set, err := compile(t, base, plain, site)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]rules.Mode{"from-pack": rules.ModeAnnotate, "own": rules.ModeObserve,
		"patched": rules.ModeEnforce, "unset": rules.ModeEnforce}
	for _, r := range set.Rules {
		if r.Mode != want[r.ID] {
			t.Errorf("rule %s: mode %q, want %q", r.ID, r.Mode, want[r.ID])
		}
	}

	for _, c := range []struct{ m, ceiling, want rules.Mode }{
		{rules.ModeEnforce, rules.ModeObserve, rules.ModeObserve},
		{rules.ModeEnforce, rules.ModeAnnotate, rules.ModeAnnotate},
		{rules.ModeObserve, rules.ModeEnforce, rules.ModeObserve},
		{rules.ModeAnnotate, "", rules.ModeAnnotate},
	} {
		if got := c.m.Cap(c.ceiling); got != c.want {
			t.Errorf("%s capped at %q = %s, want %s", c.m, c.ceiling, got, c.want)
		}
	}
	if _, err := rules.ParseMode("enforcing"); err == nil {
		t.Error("ParseMode accepted enforcing")
	}
	if m, err := rules.ParseMode("annotate"); err != nil || m != rules.ModeAnnotate {
		t.Errorf("ParseMode(annotate) = %q, %v", m, err)
	}
}

package rules_test

import (
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
)

// TestProbeWhileBusy: a probe rule's whileBusy defaults to taint-unconfirmed, takes
// the pack's default, and a value outside the three is refused at its file and line.
func TestProbeWhileBusy(t *testing.T) {
	pack := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: base}
spec:
  defaults: {severity: critical, action: probe, probe: {checks: [nvml, pciebw]WAIT}}
  rules:
    - id: aer
      match: {regex: 'AER'}
    - id: xid
      match: {regex: 'Xid'}
      probe: {checks: [pciebw], whileBusy: ignore}
`
	set, err := compile(t, strings.Replace(pack, "WAIT", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Rule("base", "aer").Probe.WhileBusy; got != rules.WhileBusyTaintUnconfirmed {
		t.Errorf("default whileBusy %q, want %q", got, rules.WhileBusyTaintUnconfirmed)
	}
	if got := set.Rule("base", "xid").Probe.WhileBusy; got != rules.WhileBusyIgnore {
		t.Errorf("whileBusy %q, want ignore", got)
	}
	set, err = compile(t, strings.Replace(pack, "WAIT", ", whileBusy: wait", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Rule("base", "aer").Probe.WhileBusy; got != rules.WhileBusyWait {
		t.Errorf("whileBusy from the pack's defaults %q, want wait", got)
	}
	_, err = compile(t, strings.NewReplacer("WAIT", "", "whileBusy: ignore", "whileBusy: later").Replace(pack))
	want := `mem/a.yaml:11:44: pack "base": rule "xid": probe whileBusy must be one of [taint-unconfirmed wait ignore], not "later"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

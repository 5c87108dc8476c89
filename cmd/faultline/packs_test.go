package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

// demoPacks is the demo's site pack: it patches built-in rules by id.
const demoPacks = "../../test/demo/packs"

const xid79 = "[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"

func writeSitePack(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "site.yaml")
	pack := "apiVersion: faultline.io/v1\nkind: RulePack\nmetadata: {name: site}\nspec:\n  rules:\n" + body
	if err := os.WriteFile(p, []byte(pack), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSitePackLayersOverBuiltins: a site pack that patches built-in rules by id
// lints and tests with the built-in packs alone, its own tests only.
func TestSitePackLayersOverBuiltins(t *testing.T) {
	out, err := run(t, "", "rules", "lint", demoPacks)
	if err != nil || !strings.Contains(out, "(1 given)") || !strings.HasSuffix(strings.TrimSpace(out), " 0 warnings") {
		t.Errorf("lint: %v\n%s", err, out)
	}
	out, err = run(t, "", "rules", "test", demoPacks)
	if err != nil || strings.TrimSpace(out) != "1 passed, 0 failed" {
		t.Errorf("test: %v\n%s", err, out)
	}
	// --packs is the same as an argument.
	out, err = run(t, "", "rules", "test", "--packs", demoPacks)
	if err != nil || strings.TrimSpace(out) != "1 passed, 0 failed" {
		t.Errorf("test --packs: %v\n%s", err, out)
	}
	// Without the built-in packs, the patches patch nothing.
	for _, cmd := range []string{"lint", "test"} {
		_, err := run(t, "", "rules", cmd, "--no-default-packs", demoPacks)
		if err == nil || !strings.Contains(err.Error(), `demo.yaml:11: pack "demo-site": rule "link-flap": rule has no match and overrides no earlier rule`) {
			t.Errorf("%s --no-default-packs: err = %v", cmd, err)
		}
	}
}

// TestRulesTestBuiltins: with no pack given, rules test runs the built-in packs'
// tests; given a copy of them with --no-default-packs (make test), the same tests.
func TestRulesTestBuiltins(t *testing.T) {
	count := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed$`)
	builtin, err := run(t, "", "rules", "test")
	if err != nil || !count.MatchString(builtin) {
		t.Fatalf("rules test: %v\n%s", err, builtin)
	}
	copied, err := run(t, "", "rules", "test", "--no-default-packs", "../../rules/packs")
	if err != nil || copied != builtin {
		t.Errorf("rules test --no-default-packs rules/packs: %v\n%s\nwant\n%s", err, copied, builtin)
	}
}

// TestScanSitePackOverrides: scan --packs layers the site pack over the built-in
// packs: the built-in Xid 79 rule still matches, with the site's severity and
// action; --no-default-packs leaves the site pack alone.
func TestScanSitePackOverrides(t *testing.T) {
	site := writeSitePack(t, "    - id: xid-gpu-lost\n      severity: warning\n      action: event\n")
	out, err := run(t, xid79, "scan", "--format", "jsonl", "--packs", site)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var m struct{ Pack, Rule, Severity, Action string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &m); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if m.Pack != "nvidia-xid" || m.Rule != "xid-gpu-lost" || m.Severity != "warning" || m.Action != "event" {
		t.Errorf("match %+v, want nvidia-xid/xid-gpu-lost patched to warning, event", m)
	}

	if _, err := run(t, xid79, "scan", "--no-default-packs", "--packs", site); err == nil ||
		!strings.Contains(err.Error(), "site.yaml:6: pack \"site\": rule \"xid-gpu-lost\": rule has no match and overrides no earlier rule") {
		t.Errorf("--no-default-packs with a patch only: err = %v", err)
	}
	own := writeSitePack(t, "    - id: own\n      match: {regex: 'fallen off the bus'}\n      severity: info\n      action: none\n")
	out, err = run(t, xid79, "scan", "--format", "jsonl", "--no-default-packs", "--packs", own)
	if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"rule":"own"`) {
		t.Errorf("--no-default-packs: the site pack's rule alone: %v\n%s", err, out)
	}
	if _, err := run(t, xid79, "scan", "--no-default-packs"); err == nil || !strings.Contains(err.Error(), "leaves this set empty") {
		t.Errorf("--no-default-packs and no --packs: err = %v", err)
	}
}

// TestSitePackUnknownID: a patch of an id no earlier pack has fails every command
// with its file:line and rule.
func TestSitePackUnknownID(t *testing.T) {
	site := writeSitePack(t, "    - id: no-such-rule\n      action: event\n")
	want := "site.yaml:6: pack \"site\": rule \"no-such-rule\": rule has no match and overrides no earlier rule"
	for _, args := range [][]string{{"scan", "--packs", site}, {"rules", "lint", site}, {"rules", "test", site}, {"rules", "coverage", "--packs", site}} {
		if _, err := run(t, xid79, args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: err = %v, want %q", args, err, want)
		}
	}
}

// escalationExample is the documented opt-in ladders (docs/lifecycle.md).
const escalationExample = "../../docs/examples/escalation-pack.yaml"

// TestEscalationExamplePack: the example of the opt-in hand-offs lints and passes
// its tests over the built-in packs, and its ladders are the ones no default pack
// has: a drain, a GPU reset and a remediation hand-off.
func TestEscalationExamplePack(t *testing.T) {
	out, err := run(t, "", "rules", "lint", escalationExample)
	if err != nil || !strings.Contains(out, "(1 given)") || !strings.HasSuffix(strings.TrimSpace(out), " 0 warnings") {
		t.Errorf("lint: %v\n%s", err, out)
	}
	out, err = run(t, "", "rules", "test", escalationExample)
	if err != nil || strings.TrimSpace(out) != "3 passed, 0 failed" {
		t.Errorf("test: %v\n%s", err, out)
	}
	builtin, given, err := packs.Layered(true, rules.Loader{MatchingOnly: true}, rules.Loader{}, escalationExample)
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(append(builtin, given...))
	if err != nil {
		t.Fatal(err)
	}
	actions := map[rules.StepAction]bool{}
	for _, id := range []string{"xid-gpu-lost", "xid-gpu-reset-required"} {
		r := set.Rule("nvidia-xid", id)
		if r == nil || len(r.Escalate) == 0 {
			t.Fatalf("%s: no ladder in the example", id)
		}
		for _, s := range r.Escalate {
			actions[s.Action] = true
		}
	}
	for _, a := range []rules.StepAction{rules.StepDrain, rules.StepGPUReset, rules.StepRemediate, rules.StepService} {
		if !actions[a] {
			t.Errorf("the example has no %s step (steps: %v)", a, actions)
		}
	}
}

// TestTaintAllowance: a pack whose taint evicts (NoExecute) or has a key outside
// faultline.io/ fails every command with its file:line and rule, unless the
// command is given the allowance; an allowance without NoSchedule is refused.
func TestTaintAllowance(t *testing.T) {
	const rule = "    - id: evicts\n      match: {regex: 'fallen off the bus'}\n      severity: critical\n      action: taint\n" +
		"      tests: [{line: 'GPU has fallen off the bus', expect: {action: taint}}]\n"
	noExecute := writeSitePack(t, rule+"      taint: {effect: NoExecute}\n")
	foreign := writeSitePack(t, rule+"      taint: {key: example.com/gpu}\n")
	commands := [][]string{{"scan"}, {"rules", "lint"}, {"rules", "test"}, {"rules", "coverage"}}
	for _, args := range commands {
		args := append(slices.Clone(args), "--packs")
		for _, tc := range []struct{ pack, want, allow string }{
			{noExecute, `site.yaml:11:23: pack "site": rule "evicts": taint effect NoExecute (it evicts every pod of the node at once, PodDisruptionBudgets or not) is not allowed`,
				"--allow-taint-effects=NoSchedule,NoExecute"},
			{foreign, `site.yaml:11:20: pack "site": rule "evicts": taint key "example.com/gpu" is not under faultline.io/`,
				"--allow-taint-key-prefixes=example.com/"},
		} {
			if _, err := run(t, xid79, append(args, tc.pack)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: err = %v, want %q", args, err, tc.want)
			}
			if args[1] == "coverage" {
				continue // it needs the inventory, and loads as the others do
			}
			if out, err := run(t, xid79, append(args, tc.pack, tc.allow)...); err != nil {
				t.Errorf("%v %s: %v\n%s", args, tc.allow, err, out)
			}
		}
	}
	if _, err := run(t, "", "rules", "lint", "--allow-taint-effects=PreferNoSchedule"); err == nil || !strings.Contains(err.Error(), "NoSchedule, the default effect of every rule's taint, must be among them") {
		t.Errorf("an allowance without NoSchedule: %v", err)
	}
}

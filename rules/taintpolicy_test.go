package rules_test

import (
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
)

// TestTaintPolicy: the taints testdata/bad/bad-taint.yaml asks for (NoExecute, keys
// outside faultline.io/) load with an allowance that names them, and only with it:
// each allowance opens only what it names.
func TestTaintPolicy(t *testing.T) {
	const file = "testdata/bad/bad-taint.yaml"
	all := rules.TaintPolicy{Effects: rules.TaintEffects, KeyPrefixes: []string{"example.com/", "node.kubernetes.io/", "faultline.io.evil.com/"}}
	ps, err := rules.Loader{Taints: all}.LoadPaths(file)
	if err != nil {
		t.Fatalf("with every allowance: %v", err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	if r := set.Rule("bad", "climbs"); r == nil || r.Taint.Key != "example.com/gpu" || r.Taint.Effect != "NoExecute" || len(r.Escalate) != 1 {
		t.Errorf("climbs: %+v", r)
	}
	if r := set.Rule("bad", "evicts"); r == nil || r.Taint.Effect != "NoExecute" {
		t.Errorf("evicts: %+v", r)
	}

	effectsOnly := rules.TaintPolicy{Effects: []string{"NoSchedule", "NoExecute"}}
	_, err = rules.Loader{Taints: effectsOnly}.LoadPaths(file)
	if err == nil || strings.Contains(err.Error(), "taint effect") || strings.Count(err.Error(), "is not under faultline.io/") != 3 {
		t.Errorf("NoExecute allowed, no key prefix: %v, want the three foreign keys refused and nothing else", err)
	}
	keysOnly := rules.TaintPolicy{KeyPrefixes: all.KeyPrefixes}
	_, err = rules.Loader{Taints: keysOnly}.LoadPaths(file)
	if err == nil || strings.Contains(err.Error(), "taint key") || strings.Count(err.Error(), "taint effect NoExecute") != 3 {
		t.Errorf("key prefixes allowed, not NoExecute: %v, want the three NoExecute taints refused and nothing else", err)
	}
	preferOnly := rules.TaintPolicy{Effects: []string{"NoSchedule"}}
	_, err = rules.Loader{Taints: preferOnly}.ParseFile("p.yaml", []byte(basePack+"      taint: {effect: PreferNoSchedule}\n"))
	if err == nil || !strings.Contains(err.Error(), `p.yaml:13:23: pack "base": rule "link-down": taint effect PreferNoSchedule is not allowed: the allowed effects are NoSchedule;`) {
		t.Errorf("PreferNoSchedule with only NoSchedule allowed: %v", err)
	}
	// The defaults: a faultline.io/ key, NoSchedule or PreferNoSchedule, or none.
	for _, taint := range []string{"{key: faultline.io/gpu, effect: NoSchedule}", "{effect: PreferNoSchedule}", "{value: x}"} {
		if _, err := (rules.Loader{}).ParseFile("ok.yaml", []byte(basePack+"      taint: "+taint+"\n")); err != nil {
			t.Errorf("taint %s: %v", taint, err)
		}
	}
}

func TestTaintPolicyCheck(t *testing.T) {
	for _, tc := range []struct {
		p    rules.TaintPolicy
		want string
	}{
		{rules.TaintPolicy{}, ""},
		{rules.TaintPolicy{Effects: []string{"NoSchedule", "NoExecute"}, KeyPrefixes: []string{"example.com/"}}, ""},
		{rules.TaintPolicy{Effects: []string{"NoSchedule", "Evict"}}, `taint effect "Evict"`},
		{rules.TaintPolicy{Effects: []string{"PreferNoSchedule"}}, "NoSchedule, the default effect"},
		{rules.TaintPolicy{KeyPrefixes: []string{"example.com"}}, `taint key prefix "example.com"`},
		{rules.TaintPolicy{KeyPrefixes: []string{"Not A Domain/"}}, `taint key prefix "Not A Domain/"`},
	} {
		err := tc.p.Check()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
}

package packs_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

// The built-in packs load as Checked (decoded from their parsed nodes, without the
// strict second pass) into exactly what the strict decoder makes of them, and the
// strict decoder accepts them: Checked is only ever true of them.
func TestCheckedLoadIsTheStrictLoad(t *testing.T) {
	for _, matching := range []bool{true, false} {
		strict, err := rules.Loader{MatchingOnly: matching}.LoadFS(packs.FS, ".")
		if err != nil {
			t.Fatalf("strict load (matching only %v): %v", matching, err)
		}
		checked, err := rules.Loader{MatchingOnly: matching, Checked: true}.LoadFS(packs.FS, ".")
		if err != nil {
			t.Fatalf("checked load (matching only %v): %v", matching, err)
		}
		if len(strict) == 0 || !reflect.DeepEqual(strict, checked) {
			t.Errorf("matching only %v: the checked load differs from the strict one", matching)
		}
	}
}

// The built-in packs' taints are faultline.io/ keys with effect NoSchedule, which
// every taint policy allows (a policy must allow NoSchedule): so the compiled image,
// loaded without validation, never holds a taint the controller's policy refuses.
func TestBuiltinTaintsPassEveryPolicy(t *testing.T) {
	ps, err := packs.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	strictest := rules.TaintPolicy{Effects: []string{"NoSchedule"}}
	if err := strictest.Check(); err != nil {
		t.Fatalf("the strictest policy: %v", err)
	}
	for _, r := range set.Rules {
		if r.Taint.Key == "" && r.Taint.Effect == "" {
			continue
		}
		if !strings.HasPrefix(r.Taint.Key, "faultline.io/") || r.Taint.Effect != "NoSchedule" {
			t.Errorf("rule %s asks for taint %s:%s: built-in rules taint faultline.io/ keys with NoSchedule only", r, r.Taint.Key, r.Taint.Effect)
		}
	}
	if _, err := (rules.Loader{Taints: strictest}).LoadFS(packs.FS, "."); err != nil {
		t.Errorf("the built-in packs under the strictest policy: %v", err)
	}
}

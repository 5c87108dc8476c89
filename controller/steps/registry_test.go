package steps_test

import (
	"context"
	"testing"

	"github.com/faultline-dev/faultline/controller/steps"
	"github.com/faultline-dev/faultline/rules/stepspec"
)

// TestEveryStepHasADo: a step the packs may name (rules/stepspec) can be carried
// out. Nothing can be registered that the packs cannot name (TestRegisterRefuses).
func TestEveryStepHasADo(t *testing.T) {
	names := stepspec.Names()
	if len(names) == 0 {
		t.Fatal("rules/stepspec names no step")
	}
	for _, n := range names {
		if do, ok := steps.Default().Get(n); !ok || do == nil {
			t.Errorf("step %s has a spec and no Do", n)
		}
	}
}

func TestRegisterRefuses(t *testing.T) {
	r := steps.NewRegistry()
	do := func(context.Context, steps.Deps, steps.Target) (steps.Result, error) { return steps.Done(""), nil }
	if err := r.Register("reboot", do); err == nil {
		t.Error("a step without a spec was registered")
	}
	if err := r.Register("drain", nil); err == nil {
		t.Error("a step without a Do was registered")
	}
	if err := r.Register("drain", do); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("drain", do); err == nil {
		t.Error("a step was registered twice")
	}
}

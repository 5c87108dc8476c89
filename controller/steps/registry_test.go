package steps_test

import (
	"context"
	"slices"
	"testing"

	"github.com/faultline-dev/faultline/controller/steps"
	"github.com/faultline-dev/faultline/rules/stepspec"
)

// TestEveryStepHasADo: a step the packs may name (rules/stepspec) can be carried
// out, and nothing is registered that the packs cannot name.
func TestEveryStepHasADo(t *testing.T) {
	want := stepspec.Names()
	slices.Sort(want)
	if got := steps.Default().Names(); !slices.Equal(got, want) {
		t.Errorf("registered steps %v, specs %v", got, want)
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

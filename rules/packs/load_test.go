package packs_test

import (
	"reflect"
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

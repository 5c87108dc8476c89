package rules

import (
	"reflect"
	"testing"
)

func TestRequiredLiterals(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)`, []string{"NVRM: Xid ("}},
		{`(?:AER: Corrected|severity=Corrected)`, []string{"AER: Corrected", "severity=Corrected"}},
		{`SXid .*, (Fatal|Non-fatal)`, []string{", Fatal", ", Non-fatal"}}, // longer beats fewer
		{`[Xx]id (\d+)`, []string{"xid "}},
		{`(?i)link down`, []string{" down"}},        // k may fold to the Kelvin sign: split there
		{`(?i)GPU has fallen`, []string{" fallen"}}, // s splits too; the longest safe piece wins
		{`\d+ errors?`, []string{" error"}},
		{`a|bc`, nil}, // too short to filter on
		{`.*`, nil},   // nothing required
		{`(?:x)?abc`, []string{"abc"}},
		{`foo(bar|baz)qux`, []string{"foobarqux", "foobazqux"}},
	}
	for _, c := range cases {
		if got := requiredLiterals(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.expr, got, c.want)
		}
	}
}

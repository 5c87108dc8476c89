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

func TestRequiredLiteralSets(t *testing.T) {
	cases := []struct {
		expr string
		want [][]string
	}{
		// Every piece of a concatenation is required, each with its alternatives.
		{`NVRM:\s+(?:Reported by libos|Xid \d+ occurred at)`, [][]string{{" occurred at", "reported by libos"}, {"nvrm:"}}},
		{`nvidia-nvswitch(?P<switch>\d+): SXid \(PCI:`, [][]string{{"nvidia-nvswitch"}, {": sxid (pci:"}}},
		{`(?:abc|de)x`, [][]string{{"abcx", "dex"}}}, // "de" alone is too short, joined it is not
		{`(?:foo)?bar\d+`, [][]string{{"bar"}}},      // optional pieces require nothing
	}
	for _, c := range cases {
		if got := requiredLiteralSets(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.expr, got, c.want)
		}
	}
	if !holdsAll("x NVRM: ... Xid 5 OCCURRED AT y", requiredLiteralSets(`NVRM:\s+(?:Reported by libos|Xid \d+ occurred at)`)) {
		t.Error("holdsAll: the sets are in the line, folded")
	}
	if holdsAll("NVRM: GPU at PCI:0000:3b:00", requiredLiteralSets(`NVRM:\s+(?:Reported by libos|Xid \d+ occurred at)`)) {
		t.Error("holdsAll: the second set is not in the line")
	}
}

package main

import (
	"testing"

	"github.com/faultline-dev/faultline/rules"
)

// What a pack can say and its zero value cannot: a false or zero behind a pointer,
// an empty list or mapping (labels: {} overrides the pack's labels).
func TestLiteralKeepsWhatZeroValuesLose(t *testing.T) {
	no, zero := false, 0.0
	r := rules.Rule{ID: "r", Enabled: &no, Labels: map[string]string{},
		Match:     &rules.Match{Regex: `a\d`, Where: map[string]rules.Condition{"b": {Min: &zero}, "a": {In: rules.StringList{}}}},
		Threshold: &rules.Threshold{}}
	l := newLiteral()
	got, err := l.of(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "rules.Rule{\nID: \"r\",\nEnabled: ptr[bool](false),\nLabels: map[string]string{},\n" +
		"Match: &rules.Match{\nRegex: `a\\d`,\nWhere: map[string]rules.Condition{\n\"a\": {\nIn: rules.StringList{},\n},\n\"b\": {\nMin: ptr[float64](0),\n},\n},\n},\n" +
		"Threshold: &rules.Threshold{},\n}"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if imps := l.imports(); len(imps) != 1 || imps[0] != "github.com/faultline-dev/faultline/rules" {
		t.Fatalf("imports %v", imps)
	}
}

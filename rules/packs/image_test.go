package packs_test

import (
	"reflect"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

const regenerate = "the compiled packs (zz_generated.image.go) are not of the pack files: run `go generate ./rules/packs`"

func TestImageIsCurrent(t *testing.T) {
	if !packs.ImageCurrent() {
		t.Fatal(regenerate)
	}
}

// The compiled image loads into exactly what parsing the files for matching
// gives: every field of every pack and rule, and what the engine reads of each
// regex (its literals, literal sets, anchoring, capture names).
func TestImageIsTheParsedLoad(t *testing.T) {
	if !packs.ImageCurrent() {
		t.Fatal(regenerate)
	}
	parsed, err := rules.Loader{MatchingOnly: true, Checked: true}.LoadFS(packs.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := packs.LoadImage()
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed) == 0 || len(compiled) != len(parsed) {
		t.Fatalf("%d packs in the image, %d parsed", len(compiled), len(parsed))
	}
	for i, p := range parsed {
		c := compiled[i]
		if len(c.Spec.Rules) != len(p.Spec.Rules) {
			t.Errorf("pack %s: %d rules in the image, %d parsed", p.Metadata.Name, len(c.Spec.Rules), len(p.Spec.Rules))
			continue
		}
		for j := range p.Spec.Rules {
			if !reflect.DeepEqual(c.Spec.Rules[j], p.Spec.Rules[j]) {
				t.Errorf("pack %s: rule %s: fields %v differ from the parsed rule's", p.Metadata.Name, p.Spec.Rules[j].ID,
					differing(c.Spec.Rules[j], p.Spec.Rules[j]))
			}
		}
		if !reflect.DeepEqual(c, p) {
			t.Errorf("pack %s differs from the parsed one", p.Metadata.Name)
		}
	}
	// What matching runs on: the compiled sets, rule by rule.
	want, err := rules.Compile(parsed)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rules.Compile(compiled)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rules) != len(want.Rules) || !reflect.DeepEqual(got.Disabled, want.Disabled) {
		t.Fatalf("compiled: %d rules (%d disabled) from the image, %d (%d) parsed", len(got.Rules), len(got.Disabled), len(want.Rules), len(want.Disabled))
	}
}

// The packs the controller and scan load (LoadForMatching, Layered with the
// built-in loader for matching) come from the image.
func TestMatchingLoadsUseTheImage(t *testing.T) {
	if !packs.ImageCurrent() {
		t.Fatal(regenerate)
	}
	want, err := packs.LoadImage()
	if err != nil {
		t.Fatal(err)
	}
	got, err := packs.LoadForMatching()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadForMatching is not the image's load (error %v)", err)
	}
	layered, _, err := packs.Layered(true, rules.Loader{MatchingOnly: true, Checked: true}, rules.Loader{})
	if err != nil || !reflect.DeepEqual(layered, want) {
		t.Fatalf("Layered is not the image's load (error %v)", err)
	}
	// Two loads share the image, never their rules: a load changes nothing of it.
	if got[0] == want[0] || &got[0].Spec.Rules[0] == &want[0].Spec.Rules[0] {
		t.Fatal("two loads of the image share a pack or its rules")
	}
}

// differing names the fields of two rules that differ, or says that what the
// engine reads of their regexes (not exported) does.
func differing(a, b rules.Rule) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		f := va.Type().Field(i)
		if f.IsExported() && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, f.Name)
		}
	}
	if out == nil {
		out = []string{"the analysis of its regexes"}
	}
	return out
}

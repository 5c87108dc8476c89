package rules_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
)

// packFiles are the default packs and the broken ones of testdata.
func packFiles(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, glob := range []string{"packs/*.yaml", "testdata/bad/*.yaml"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[f] = b
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d pack files found", len(out))
	}
	return out
}

// sameParse fails when the loader's one tokenisation and yaml.v3's strict decoder
// disagree on a file: same packs, same errors.
func sameParse(t testing.TB, l rules.Loader, file string, data []byte) {
	t.Helper()
	got, gotErr := l.ParseFile(file, data)
	want, wantErr := l.ParseFileStrict(file, data)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%s: error\n got %v\nwant %v", file, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: packs differ from the strict decoder's", file)
	}
}

func TestOneTokenisationIsTheStrictDecoder(t *testing.T) {
	for f, b := range packFiles(t) {
		for _, l := range []rules.Loader{{}, {MatchingOnly: true}} {
			sameParse(t, l, f, b)
		}
	}
	// Shapes the one-tokenisation path leaves to the strict decoder, and errors the
	// two must word and order alike.
	for name, doc := range map[string]string{
		"scalar alias":           basePack + "    - {id: c, match: {regex: &r x}}\n    - {id: d, match: {regex: *r}}\n",
		"alias":                  basePack + "    - &a {id: a, match: {regex: x}}\n    - *a\n",
		"merge":                  basePack + "    - <<: {id: m}\n      match: {regex: x}\n",
		"unknown in tests":       basePack + "      tests: [{line: x, expect: {bogus: 1}}]\n",
		"unknown and type error": basePack + "      bogus: 1\n      threshold: {count: many}\n",
		"type error only":        basePack + "      threshold: {count: many}\n",
		"bad duration":           basePack + "      cooldown: soon\n",
		"two documents":          basePack + "---\n" + basePack,
		"empty document":         "---\n---\n" + basePack,
		"not a pack":             "- 1\n- 2\n",
		// Lines that look like a testing key but are none, or whose value goes
		// on past where a block value would end.
		"tests in a block scalar":    basePack + "      description: |\n        tests:\n          - not a test\n",
		"tests as a capture":         basePack + "      labels:\n        tests:\n          x\n",
		"tests in a flow mapping":    basePack + "    - {id: f, match: {regex: x},\n       tests:\n         [{line: x}],\n       severity: info}\n",
		"quoted value below the key": basePack + "      tests:\n        - line: \"a\n      b\"\n",
		"sources then tests":         basePack + "      sources:\n      - {project: p, version: v, file: f, format: x}\n      # a comment\n\n      tests:\n        - line: x\n      cooldown: 1m\n",
	} {
		sameParse(t, rules.Loader{}, name+".yaml", []byte(doc))
		if name != "unknown in tests" { // loading for matching does not read tests
			sameParse(t, rules.Loader{MatchingOnly: true}, name+".yaml", []byte(doc))
		}
	}
}

// TestDefaultPacksTakeOneTokenisation guards the speed of loading: a default pack
// with a shape the one-tokenisation path does not follow would load through the
// slower strict decoder without any other test noticing.
func TestDefaultPacksTakeOneTokenisation(t *testing.T) {
	files, err := filepath.Glob("packs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no default packs: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !rules.OneTokenisation(f, b) {
			t.Errorf("%s: loads through the strict decoder (an alias, a merge key or an unknown field?)", f)
		}
		if !rules.TestingValuesLeftOut(b) {
			t.Errorf("%s: loading for matching tokenises its tests and sources", f)
		}
	}
}

// TestMatchingOnlyLeavesOutTestsAndSources: loading for matching gives the same
// compiled rules as a full load, less the rules' tests and sources; and it still
// rejects what a full load rejects outside them.
func TestMatchingOnlyLeavesOutTestsAndSources(t *testing.T) {
	full, err := rules.LoadPaths("packs")
	if err != nil {
		t.Fatal(err)
	}
	matching, err := rules.Loader{MatchingOnly: true}.LoadPaths("packs")
	if err != nil {
		t.Fatal(err)
	}
	fullSet, err := rules.Compile(full)
	if err != nil {
		t.Fatal(err)
	}
	matchingSet, err := rules.Compile(matching)
	if err != nil {
		t.Fatal(err)
	}
	if len(fullSet.Rules) != len(matchingSet.Rules) || len(fullSet.Rules) < 100 {
		t.Fatalf("%d rules for matching, %d in full", len(matchingSet.Rules), len(fullSet.Rules))
	}
	// Blank the full set's tests and sources first, every rule of it: a rule may
	// point at another of its set (sameFaultAs), which must compare equal too.
	tested := 0
	for _, r := range fullSet.Rules {
		if len(r.Tests) > 0 {
			tested++
		}
		r.Tests, r.Sources, r.BenignSources = nil, nil, nil
	}
	for i, want := range fullSet.Rules {
		if !reflect.DeepEqual(want, matchingSet.Rules[i]) {
			t.Errorf("rule %s differs when loaded for matching", want)
		}
	}
	if tested == 0 {
		t.Fatal("no default rule has tests: the comparison shows nothing")
	}
	if !reflect.DeepEqual(fullSet.Disabled, matchingSet.Disabled) {
		t.Errorf("disabled: %v for matching, %v in full", matchingSet.Disabled, fullSet.Disabled)
	}

	badTest := basePack + "      tests: [{line: x, expect: {action: explode}}]\n"
	if _, err := rules.ParseFile("t.yaml", []byte(badTest)); err == nil || !strings.Contains(err.Error(), "expected action") {
		t.Errorf("full load of a bad test: %v", err)
	}
	if _, err := (rules.Loader{MatchingOnly: true}).ParseFile("t.yaml", []byte(badTest)); err != nil {
		t.Errorf("loading for matching validated a test: %v", err)
	}
	for _, bad := range []string{
		basePack + "      bogus: 1\n",
		basePack + "      action: explode\n",
		basePack + "      match: {regex: '('}\n",
	} {
		if _, err := (rules.Loader{MatchingOnly: true}).ParseFile("t.yaml", []byte(bad)); err == nil {
			t.Errorf("loading for matching accepted\n%s", bad)
		}
	}
}

// FuzzOneTokenisation: for any input the loader's one tokenisation gives what
// yaml.v3's strict decoder gives.
func FuzzOneTokenisation(f *testing.F) {
	for _, b := range packFiles(f) {
		f.Add(b)
	}
	f.Add([]byte(basePack))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameParse(t, rules.Loader{}, "fuzz.yaml", data)
		// Loading for matching does not read tests and sources, so it may accept
		// what the full load rejects there; on what the full load accepts, it
		// must agree with the strict decoder.
		if _, err := rules.ParseFile("fuzz.yaml", data); err == nil {
			sameParse(t, rules.Loader{MatchingOnly: true}, "fuzz.yaml", data)
		}
	})
}

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

// sameParse fails when loading a file for matching, with its rules' testing values
// blanked, disagrees with decoding the whole file and leaving them out after:
// same packs, same errors.
func sameParse(t testing.TB, file string, data []byte) {
	t.Helper()
	l := rules.Loader{MatchingOnly: true}
	got, gotErr := l.ParseFile(file, data)
	want, wantErr := l.ParseFileWhole(file, data)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%s: error\n got %v\nwant %v", file, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: packs differ from the whole file's", file)
	}
}

func TestBlankedTestingValuesAreTheWholeFile(t *testing.T) {
	for f, b := range packFiles(t) {
		sameParse(t, f, b)
	}
	// Shapes and errors the two must decode and word alike.
	for name, doc := range map[string]string{
		"scalar alias":           basePack + "    - {id: c, match: {regex: &r x}}\n    - {id: d, match: {regex: *r}}\n",
		"alias":                  basePack + "    - &a {id: a, match: {regex: x}}\n    - *a\n",
		"merge":                  basePack + "    - <<: {id: m}\n      match: {regex: x}\n",
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
		sameParse(t, name+".yaml", []byte(doc))
	}
}

// TestUnknownFieldsAreErrors: yaml.v3's strict decoder refuses an unknown field
// anywhere in a pack, and the error names file:line and the rule.
func TestUnknownFieldsAreErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{basePack + "      bogus: 1\n", `u.yaml:13:7: pack "base": rule "link-down": unknown field "bogus" in a rule`},
		{basePack + "      taint: {key: k, efect: NoSchedule}\n", `u.yaml:13:23: pack "base": rule "link-down": unknown field "efect" in taint`},
		{basePack + "      tests: [{line: x, expect: {bogus: 1}}]\n", `u.yaml:13:34: pack "base": rule "link-down": unknown field "bogus" in expect`},
	} {
		_, err := rules.Loader{}.ParseFile("u.yaml", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %s", err, tc.want)
		}
	}
}

// TestDefaultPacksLeaveOutTestingValues guards the speed of loading for matching:
// a default pack whose tests and sources cannot be blanked would be decoded whole
// without any other test noticing.
func TestDefaultPacksLeaveOutTestingValues(t *testing.T) {
	files, err := filepath.Glob("packs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no default packs: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !rules.TestingValuesLeftOut(b) {
			t.Errorf("%s: loading for matching decodes its tests and sources", f)
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
	if _, err := (rules.Loader{}).ParseFile("t.yaml", []byte(badTest)); err == nil || !strings.Contains(err.Error(), "expected action") {
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

// FuzzBlankedTestingValues: for any input the full load accepts, loading it for
// matching with its testing values blanked gives what the whole file gives.
func FuzzBlankedTestingValues(f *testing.F) {
	for _, b := range packFiles(f) {
		f.Add(b)
	}
	f.Add([]byte(basePack))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Loading for matching does not read tests and sources, so it may accept
		// what the full load rejects there.
		if _, err := (rules.Loader{}).ParseFile("fuzz.yaml", data); err == nil {
			sameParse(t, "fuzz.yaml", data)
		}
	})
}

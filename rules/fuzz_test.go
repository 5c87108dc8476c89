package rules_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// FuzzLoad feeds arbitrary bytes to the pack loader: it must return packs or an
// error naming the file, never panic; whatever compiles must also match without
// panicking.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"packs", "testdata/bad"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(basePack))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := rules.Loader{}.ParseFile("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		set, err := rules.Compile(ps)
		if err != nil {
			return
		}
		e := rules.NewEngine(set)
		for _, l := range []string{"", "Xid (PCI:0000:01:00): 79, x", string(data)} {
			fast := e.Match(&logstream.Line{Text: l}, nil)
			slow := e.MatchNaive(&logstream.Line{Text: l}, nil)
			if len(fast) != len(slow) {
				t.Fatalf("prefilter disagrees on %q: %d vs %d hits", l, len(fast), len(slow))
			}
		}
	})
}

package packs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/faultline-dev/faultline/test/packengine"
)

// TestReadmeFigures keeps the README's figures of the default packs and of the
// corpus equal to what the code has: the number of rules, each with inline tests,
// and the number of real log lines the packs are measured on.
func TestReadmeFigures(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	figure := func(re string) int {
		t.Helper()
		m := regexp.MustCompile(re).FindSubmatch(readme)
		if m == nil {
			t.Fatalf("README.md has no figure matching %s", re)
		}
		n, err := strconv.Atoi(string(regexp.MustCompile(`[,\s]`).ReplaceAll(m[1], nil)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got, want := figure(`GPU rule packs as data \(([\d,]+) rules`), len(e.Set().Rules); got != want {
		t.Errorf("README.md says %d rules; the default packs have %d", got, want)
	}
	if got, want := figure(`measured on ([\d,]+) real log\s+lines`), len(loadCorpus(t)); got != want {
		t.Errorf("README.md says the packs are measured on %d real log lines; the corpus has %d", got, want)
	}
	// "each with inline tests"
	if !regexp.MustCompile(`[\d,]+ rules, each with inline tests`).Match(readme) {
		t.Fatal("README.md no longer says each rule has inline tests")
	}
	for _, r := range e.Set().Rules {
		if len(r.Tests) == 0 {
			t.Errorf("README.md says each rule has inline tests; %s/%s has none", r.Pack, r.ID)
		}
	}
}

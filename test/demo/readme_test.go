package demo_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/faultline-dev/faultline/test/demo"
)

// README.md says how many simulated GPU nodes make demo registers.
func TestReadmeDemoNodes(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`registers (\w+) simulated GPU nodes`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md no longer says how many simulated GPU nodes the demo registers")
	}
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
	if demo.DefaultNodes >= len(words) || string(m[1]) != words[demo.DefaultNodes] {
		t.Errorf("README.md says the demo registers %s simulated GPU nodes; it registers %d", m[1], demo.DefaultNodes)
	}
}

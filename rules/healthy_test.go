package rules_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// fruitlessOnHealthy are the rules whose primary regex runs, and fails, on a line of
// a healthy node's kernel log (testdata/healthy-kernel-templates.txt), by template:
// the known cost of each line. A rule whose literals a healthy line holds makes every
// such line pay for its regex; keyed on a phrase only its own message has, it costs
// nothing there. Add to this list only knowingly (and measure `make bench-scan`).
var fruitlessOnHealthy = map[string][]string{
	// The driver's identity line at load: nvidia-rm-error's literal sets compare
	// without regard to case and its regex with it; the template's short UUID is not
	// the form xid-gpu-identity reads.
	"NVRM: GPU at PCI:0000:%x:00: GPU-%x-%x-%x": {"nvidia-xid/xid-gpu-identity", "nvidia-driver/nvidia-rm-error"},
}

// TestHealthyLinesCheap: on each line a healthy GPU node's kernel prints all day, no
// rule's regex runs and fails but the ones listed. One rule keyed on " callbacks
// suppressed" (the line of every rate-limited kernel message) once ran a long
// machine-check alternation on each of them and halved the scan's speed.
func TestHealthyLinesCheap(t *testing.T) {
	e := defaultEngine(t)
	b, err := os.ReadFile(filepath.Join("..", "testdata", "healthy-kernel-templates.txt"))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(7))
	n := 0
	for _, tmpl := range strings.Split(string(b), "\n") {
		if tmpl == "" || strings.HasPrefix(tmpl, "#") {
			continue
		}
		n++
		args := make([]any, strings.Count(tmpl, "%"))
		for i := range args {
			args[i] = 10 + r.Intn(60000)
		}
		line := fmt.Sprintf(tmpl, args...)
		got := e.FruitlessPrimaries(&logstream.Line{Text: line, Source: string(rules.SourceKernel)})
		want := fruitlessOnHealthy[tmpl]
		for _, id := range got {
			if !slices.Contains(want, id) {
				t.Errorf("rule %s runs its regex, and fails, on the healthy line %q: key it on a phrase only its own message has", id, line)
			}
		}
		for _, id := range want {
			if !slices.Contains(got, id) {
				t.Errorf("rule %s no longer runs on %q: remove it from fruitlessOnHealthy", id, tmpl)
			}
		}
	}
	if n < 20 {
		t.Fatalf("%d healthy templates, want at least 20", n)
	}
}

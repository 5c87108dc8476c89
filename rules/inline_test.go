package rules

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestPrefilterProbeInlined: the prefilter's probe is inlined at each of its calls
// in find. Its cost sits at the compiler's inlining budget, and a probe called, not
// inlined, made the prefilter a fifth slower: a small change of it, or of what it
// calls, can do that unnoticed. A count of the compiler's decisions, so it fails the
// same way on every machine.
func TestPrefilterProbeInlined(t *testing.T) {
	goCmd := "go" // from PATH where the test binary knows no GOROOT (-trimpath)
	if root := runtime.GOROOT(); root != "" {
		goCmd = filepath.Join(root, "bin", "go")
	}
	out, err := exec.Command(goCmd, "build", "-gcflags=-m", "-o", "/dev/null", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	calls := strings.Count(string(out), "inlining call to (*gramFilter).find.func1")
	if calls < 6 {
		t.Errorf("the prefilter's probe is inlined at %d of its 6 calls in find; keep it within the inlining budget (go build -gcflags=-m ./rules)", calls)
	}
}

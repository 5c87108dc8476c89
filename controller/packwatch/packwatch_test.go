package packwatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

const good = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: r1
      match: {regex: 'site fault one'}
      severity: warning
      action: event
`

func TestReloadKeepsLastGoodSet(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "site.yaml")
	if err := os.WriteFile(p, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	var reloads int
	var errs []error
	w, err := New(Config{Defaults: true, Dirs: []string{dir},
		OnReload: func(*rules.Engine) { reloads++ }, OnError: func(e error) { errs = append(errs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	n := len(w.Engine().Set().Rules)
	if reloads != 1 || n < 20 {
		t.Fatalf("reloads=%d rules=%d", reloads, n)
	}
	if w.Check() {
		t.Fatal("reloaded without a change")
	}
	// A broken edit: rejected with file:line, the old rules stay.
	broken := strings.Replace(good, "'site fault one'", "'(unclosed'", 1)
	if err := os.WriteFile(p, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if w.Check() {
		t.Fatal("a broken pack became active")
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "site.yaml:7:") || !strings.Contains(errs[0].Error(), `rule "r1"`) {
		t.Fatalf("errors = %v", errs)
	}
	if got := len(w.Engine().Set().Rules); got != n {
		t.Fatalf("rules after a failed reload = %d, want %d", got, n)
	}
	if hits := w.Engine().Match(&logstream.Line{Text: "site fault one"}, nil); len(hits) != 1 {
		t.Fatalf("old rule no longer matches: %v", hits)
	}
	// Reported once, not every interval.
	w.Check()
	if len(errs) != 1 {
		t.Fatalf("error reported %d times", len(errs))
	}
	// A good edit becomes active.
	fixed := strings.Replace(good, "'site fault one'", "'site fault two'", 1)
	if err := os.WriteFile(p, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if !w.Check() || reloads != 2 {
		t.Fatalf("good edit not loaded (reloads=%d)", reloads)
	}
	if hits := w.Engine().Match(&logstream.Line{Text: "site fault two"}, nil); len(hits) != 1 {
		t.Fatalf("new rule does not match")
	}
}

func TestInitialBrokenPackIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("apiVersion: nope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dirs: []string{dir}}); err == nil {
		t.Fatal("no error")
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("no packs: no error")
	}
}

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

// TestTaintAllowance: a pack whose taint is NoExecute does not load, at the start
// or on a reload, unless Config.Taints allows it; an unusable allowance is refused.
func TestTaintAllowance(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "site.yaml")
	evicts := strings.Replace(good, "action: event", "action: taint\n      taint: {effect: NoExecute}", 1)
	if err := os.WriteFile(p, []byte(evicts), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dirs: []string{dir}}); err == nil || !strings.Contains(err.Error(), `site.yaml:10:23: pack "site": rule "r1": taint effect NoExecute`) {
		t.Fatalf("NoExecute without the allowance: %v", err)
	}
	w, err := New(Config{Dirs: []string{dir}, Taints: rules.TaintPolicy{Effects: rules.TaintEffects}})
	if err != nil {
		t.Fatalf("NoExecute with the allowance: %v", err)
	}
	if r := w.Engine().Set().Rule("site", "r1"); r == nil || r.Taint.Effect != "NoExecute" {
		t.Fatalf("r1: %+v", r)
	}
	var errs []error
	w, err = New(Config{Dirs: []string{dir}, Taints: rules.TaintPolicy{Effects: rules.TaintEffects}, OnError: func(e error) { errs = append(errs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	foreign := strings.Replace(evicts, "{effect: NoExecute}", "{key: example.com/gpu}", 1)
	if err := os.WriteFile(p, []byte(foreign), 0o644); err != nil {
		t.Fatal(err)
	}
	if w.Check() || len(errs) != 1 || !strings.Contains(errs[0].Error(), `taint key "example.com/gpu" is not under faultline.io/`) {
		t.Fatalf("a reload to a foreign key: errors %v", errs)
	}
	if _, err := New(Config{Dirs: []string{dir}, Taints: rules.TaintPolicy{Effects: []string{"NoExecute"}}}); err == nil || !strings.Contains(err.Error(), "NoSchedule") {
		t.Errorf("an allowance without NoSchedule: %v", err)
	}
}

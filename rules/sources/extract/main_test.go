package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules/sources"
)

const testPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: t}
spec:
  defaults: {source: kernel, severity: warning, action: event}
  rules:
    - id: lost
      match: {regex: 'has fallen off the bus'}
`

const testSource = `static void lost(struct dev *d)
{
	dev_err(d, "GPU has fallen off the bus\n");
	dev_err(d, "register dump follows\n");
}
`

// TestExtractKeepsReasonsAndRefreshes runs the command as a pack author would: a
// first extraction records the covering rule, an ignore reason written by hand
// survives a second extraction, and -refresh drops a rule that no longer matches.
func TestExtractKeepsReasonsAndRefreshes(t *testing.T) {
	dir := t.TempDir()
	packs := filepath.Join(dir, "packs")
	inv := filepath.Join(dir, "inventory")
	must(t, os.MkdirAll(packs, 0o755))
	must(t, os.WriteFile(filepath.Join(packs, "t.yaml"), []byte(testPack), 0o644))
	src := filepath.Join(dir, "drv.c")
	must(t, os.WriteFile(src, []byte(testSource), 0o644))
	out := filepath.Join(inv, sources.FileName("example/drv", "drivers/drv/drv.c"))
	args := []string{"-packs", packs, "-project", "example/drv", "-version", "v1", "-file", "drivers/drv/drv.c", "-inventory", inv, src}

	must(t, run(args))
	got := read(t, out)
	if len(got.Messages) != 2 || got.Messages[0].Rule != "t/lost" || got.Messages[1].Rule != "" {
		t.Fatalf("first extraction: %+v", got.Messages)
	}

	got.Messages[1].Ignore = "detail line of the report above"
	must(t, sources.Write(out, got))
	must(t, run(args))
	if got = read(t, out); got.Messages[1].Ignore != "detail line of the report above" {
		t.Errorf("the ignore reason was not kept: %+v", got.Messages[1])
	}

	// A header written by hand (a file listed by hand says so) survives a refresh.
	body, err := os.ReadFile(out)
	must(t, err)
	if !strings.HasPrefix(string(body), "# Messages of example/drv:drivers/drv/drv.c in every version listed, extracted by\n") {
		t.Errorf("a new inventory's header: %q", strings.SplitN(string(body), "\n", 2)[0])
	}
	const handHeader = "# Messages of example/drv:drivers/drv/drv.c, listed by hand.\n"
	must(t, os.WriteFile(out, append([]byte(handHeader), body[strings.Index(string(body), "project:"):]...), 0o644))
	must(t, os.WriteFile(filepath.Join(packs, "t.yaml"), []byte(strings.Replace(testPack, "has fallen off the bus", "no such phrase", 1)), 0o644))
	must(t, run([]string{"-packs", packs, "-refresh", inv}))
	if got = read(t, out); got.Messages[0].Rule != "" {
		t.Errorf("refresh kept a rule that no longer matches: %+v", got.Messages[0])
	}
	if body, err = os.ReadFile(out); err != nil || !strings.HasPrefix(string(body), handHeader+"project:") {
		t.Errorf("refresh did not keep the header written by hand: %q (%v)", body[:min(len(body), 120)], err)
	}
	if err := run([]string{"-packs", packs, "-project", "p"}); err == nil {
		t.Error("missing arguments were accepted")
	}

	// A second version with one wording changed: the unchanged message lists
	// both versions; -drop takes the second away again.
	must(t, os.WriteFile(src, []byte(strings.Replace(testSource, "register dump follows", "register dump:", 1)), 0o644))
	must(t, run([]string{"-packs", packs, "-project", "example/drv", "-version", "v2", "-file", "drivers/drv/drv.c", "-inventory", inv, src}))
	got = read(t, out)
	if len(got.Messages) != 3 || strings.Join(got.Messages[0].Versions, ",") != "v2,v1" {
		t.Fatalf("after a second version: %+v", got.Messages)
	}
	must(t, run([]string{"-packs", packs, "-project", "example/drv", "-version", "v2", "-file", "drivers/drv/drv.c", "-inventory", inv, "-drop"}))
	if got = read(t, out); len(got.Messages) != 2 || len(got.Versions) != 1 || got.Messages[1].Ignore == "" {
		t.Errorf("after dropping v2: %+v", got)
	}
}

func read(t *testing.T, p string) *sources.Inventory {
	t.Helper()
	inv, err := sources.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

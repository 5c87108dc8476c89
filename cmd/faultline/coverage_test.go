package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/internal/cli"
)

// TestRulesCoverageByVersion runs `rules coverage` on a small inventory of two
// versions: the JSON form has the total (each wording once) and a per-version
// list; the text form a row per project and version; an unaccounted message
// exits 1.
func TestRulesCoverageByVersion(t *testing.T) {
	dir := t.TempDir()
	packs := filepath.Join(dir, "packs")
	inv := filepath.Join(dir, "inventory")
	for _, d := range []string{packs, inv} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pack := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: t}
spec:
  defaults: {source: kernel, severity: warning, action: event}
  rules:
    - id: timeout
      match: {regex: 'I/O (?:tag )?-?\d+ .*timeout'}
`
	inventory := `project: linux
file: drivers/nvme/host/core.c
source: kernel
versions:
  - {version: "v6.12.117", from: "Debian linux-source-6.12 6.12.117-1~deb12u1"}
  - {version: "v5.10.262", from: "Debian linux-source-5.10 5.10.262-1"}
messages:
  - {line: 1, call: dev_warn, level: warn, format: "I/O tag %d (%04x) QID %d timeout, reset controller\n", versions: ["v6.12.117"]}
  - {line: 2, call: dev_warn, level: warn, format: "I/O %d QID %d timeout, reset controller\n", versions: ["v5.10.262"]}
  - {line: 3, call: dev_err, level: err, format: "Removing after probe failure status: %d\n", versions: ["v6.12.117", "v5.10.262"], ignore: "example reason"}
  - {line: 4, call: dev_warn, level: warn, format: "unhandled\n", versions: ["v5.10.262"]}
`
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(packs, "t.yaml"), pack)
	write(filepath.Join(inv, "linux__drivers_nvme_host_core.c.yaml"), inventory)

	out, err := run(t, "", "rules", "coverage", "--no-default-packs", "--packs", packs, "--inventory", inv, "--format", "json")
	var ee cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("an unaccounted message: err = %v, want exit 1\n%s", err, out)
	}
	var rep struct {
		Total    map[string]int `json:"total"`
		Versions []struct {
			Project, Version                        string
			Messages, Covered, Ignored, Unaccounted int
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Total["messages"] != 4 || rep.Total["covered"] != 2 || rep.Total["ignored"] != 1 || rep.Total["unaccounted"] != 1 {
		t.Errorf("total %v, want 4 messages, 2 covered, 1 ignored, 1 unaccounted", rep.Total)
	}
	if len(rep.Versions) != 2 || rep.Versions[0].Version != "v6.12.117" || rep.Versions[1].Version != "v5.10.262" {
		t.Fatalf("versions %+v, want v6.12.117 then v5.10.262", rep.Versions)
	}
	if v := rep.Versions[0]; v.Messages != 2 || v.Covered != 1 || v.Ignored != 1 || v.Unaccounted != 0 {
		t.Errorf("v6.12.117: %+v", v)
	}
	if v := rep.Versions[1]; v.Messages != 3 || v.Covered != 1 || v.Ignored != 1 || v.Unaccounted != 1 {
		t.Errorf("v5.10.262: %+v", v)
	}

	// -o json prints what --format json does; -o yaml the same object.
	jsonOut := out
	if out, _ = run(t, "", "rules", "coverage", "--no-default-packs", "--packs", packs, "--inventory", inv, "-o", "json"); out != jsonOut {
		t.Errorf("-o json differs from --format json:\n%s", out)
	}
	out, _ = run(t, "", "rules", "coverage", "--no-default-packs", "--packs", packs, "--inventory", inv, "-o", "yaml")
	if y, err := yaml.YAMLToJSON([]byte(out)); err != nil {
		t.Errorf("-o yaml: %v\n%s", err, out)
	} else if j, _ := yaml.YAMLToJSON([]byte(jsonOut)); string(y) != string(j) {
		t.Errorf("-o yaml is not the JSON's object:\n%s", out)
	}

	out, _ = run(t, "", "rules", "coverage", "--no-default-packs", "--packs", packs, "--inventory", inv)
	for _, want := range []string{"linux  v6.12.117", "linux  v5.10.262", "unaccounted: drivers/nvme/host/core.c:4"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

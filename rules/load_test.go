package rules_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestBadPacks loads each broken pack in testdata/bad and compares the error with
// the golden file beside it: file, line, column, pack and rule must all be named.
func TestBadPacks(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad packs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ps, err := rules.LoadPaths(f)
			if err == nil {
				_, err = rules.Compile(ps)
			}
			if err == nil {
				t.Fatal("pack loaded without error")
			}
			golden := strings.TrimSuffix(f, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("%v (run go test -update to create it)", rerr)
			}
			if got := err.Error() + "\n"; got != string(want) {
				t.Errorf("error:\n got %s\nwant %s", got, want)
			}
			if !strings.HasPrefix(err.Error(), f+":") {
				t.Errorf("error does not start with the file name: %v", err)
			}
		})
	}
}

func compile(t *testing.T, docs ...string) (*rules.Set, error) {
	t.Helper()
	var ps []*rules.Pack
	for i, d := range docs {
		p, err := rules.Loader{}.ParseFile(filepath.Join("mem", string(rune('a'+i))+".yaml"), []byte(d))
		if err != nil {
			return nil, err
		}
		ps = append(ps, p...)
	}
	return rules.Compile(ps)
}

const basePack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: base}
spec:
  defaults: {source: kernel, severity: warning, action: event}
  rules:
    - id: xid-any
      match: {regex: 'Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)'}
    - id: link-down
      match: {regex: '(?P<dev>\S+): Link down'}
      threshold: {count: 3, window: 10m}
      action: taint
`

func TestOverrideAndDisable(t *testing.T) {
	override := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: xid-any
      action: none          # patch: no match, so only these fields change
    - id: link-down
      enabled: false
`
	set, err := compile(t, basePack, override)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Rules) != 1 || set.Rules[0].ID != "xid-any" {
		t.Fatalf("rules = %v", set.Rules)
	}
	r := set.Rules[0]
	if r.Action != rules.ActionNone || r.Severity != rules.SeverityWarning || r.Pack != "base" {
		t.Errorf("patched rule = action %s severity %s pack %s", r.Action, r.Severity, r.Pack)
	}
	if len(set.Disabled) != 1 || set.Disabled[0] != "link-down" {
		t.Errorf("disabled = %v", set.Disabled)
	}

	replace := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  defaults: {severity: critical, action: taint}
  rules:
    - id: xid-any
      match: {regex: 'XID (?P<xid>\d+)'}
`
	set, err = compile(t, basePack, replace)
	if err != nil {
		t.Fatal(err)
	}
	if set.Rules[0].ID != "xid-any" || set.Rules[0].Pack != "site" || set.Rules[0].Action != rules.ActionTaint {
		t.Errorf("replaced rule = %+v", set.Rules[0])
	}
	if set.Rules[0].Source != rules.SourceAny {
		t.Errorf("a replacing rule takes its own pack's defaults, got source %q", set.Rules[0].Source)
	}
}

func TestPatchWithoutBaseFails(t *testing.T) {
	_, err := compile(t, `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: nothing-here
      enabled: false
`)
	if err == nil || !strings.Contains(err.Error(), `mem/a.yaml:6: pack "site": rule "nothing-here": rule has no match and overrides no earlier rule`) {
		t.Fatalf("err = %v", err)
	}
}

func TestDefaultsAndTaint(t *testing.T) {
	set, err := compile(t, basePack)
	if err != nil {
		t.Fatal(err)
	}
	ld := set.Rules[1]
	if ld.Taint.Key != rules.DefaultTaintKey || ld.Taint.Value != "link-down" || ld.Taint.Effect != "NoSchedule" {
		t.Errorf("taint = %+v", ld.Taint)
	}
	if ld.Threshold.Count != 3 || ld.Threshold.Window.D() != 10*time.Minute {
		t.Errorf("threshold = %+v", ld.Threshold)
	}
	if !ld.Recover.Manual {
		t.Errorf("recover = %v, want manual by default", ld.Recover.String())
	}
}

func TestWhereConditions(t *testing.T) {
	set, err := compile(t, `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: w}
spec:
  defaults: {severity: warning, action: event}
  rules:
    - id: in-list
      match: {regex: 'code (?P<c>\w+)', where: {c: {in: [79, "0x30"]}}}
    - id: not-in
      match: {regex: 'code (?P<c>\w+)', where: {c: {notIn: [79]}}}
    - id: range
      match: {regex: 'code (?P<c>\w+)', where: {c: {min: 144, max: 150}}}
`)
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(set)
	cases := []struct {
		line string
		want []string
	}{
		{"code 79", []string{"in-list"}},
		{"code 079", []string{"in-list"}},
		{"code 48", []string{"in-list", "not-in"}}, // 0x30 is 48: numbers compare numerically
		{"code 47", []string{"not-in"}},
		{"code 0x30", []string{"in-list", "not-in"}},
		{"code 145", []string{"not-in", "range"}},
		{"code abc", []string{"not-in"}},
	}
	for _, c := range cases {
		var got []string
		for _, h := range e.Match(&logstream.Line{Text: c.line}, nil) {
			got = append(got, h.Rule.ID)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%q: got %v, want %v", c.line, got, c.want)
		}
	}
}

func TestExclusiveGroupFirstWins(t *testing.T) {
	set, err := compile(t, `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: x}
spec:
  defaults: {severity: warning, action: event}
  rules:
    - id: specific
      exclusive: g
      match: {regex: 'Xid (?P<x>\d+)', where: {x: {in: [79]}}}
    - id: catch-all
      exclusive: g
      match: {regex: 'Xid (?P<x>\d+)'}
    - id: outside
      match: {regex: 'Xid'}
`)
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(set)
	ids := func(text string) string {
		var s []string
		for _, h := range e.Match(&logstream.Line{Text: text}, nil) {
			s = append(s, h.Rule.ID)
		}
		return strings.Join(s, ",")
	}
	if got := ids("Xid 79"); got != "specific,outside" {
		t.Errorf("Xid 79: %s", got)
	}
	if got := ids("Xid 13"); got != "catch-all,outside" {
		t.Errorf("Xid 13: %s", got)
	}
}

func TestSourceAndLabels(t *testing.T) {
	set, err := compile(t, `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: s}
spec:
  defaults: {severity: warning, action: event}
  rules:
    - id: pod-only
      source: pod
      labels: {namespace: 'train-.*'}
      match: {regex: 'NCCL WARN'}
`)
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(set)
	for _, c := range []struct {
		src  rules.Source
		ns   string
		want int
	}{
		{rules.SourcePod, "train-a", 1},
		{rules.SourcePod, "default", 0},
		{rules.SourceKernel, "train-a", 0},
		{"", "train-b", 1},
	} {
		got := len(e.Match(&logstream.Line{Text: "x NCCL WARN y", Source: string(c.src), Labels: map[string]string{"namespace": c.ns}}, nil))
		if got != c.want {
			t.Errorf("source %q ns %q: %d hits, want %d", c.src, c.ns, got, c.want)
		}
	}
}

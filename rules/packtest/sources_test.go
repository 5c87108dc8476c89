package packtest_test

import (
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packtest"
)

const pack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: t}
spec:
  defaults: {source: kernel, severity: warning, action: event}
  rules:
    - id: stable-phrase
      match: {regex: 'failed to initialize device: .+ port -?\d+ \(ret = (?P<ret>-?\d+)\)'}
      sources:
        - {project: p, version: v, file: drivers/infiniband/ulp/ipoib/ipoib_main.c, call: pr_warn,
           format: "%s: failed to initialize device: %s port %d (ret = %d)\n", captures: {ret: "$4"}}
    - id: pasted-shape
      match: {regex: 'failed to initialize device: mlx5_\d+ port \d+'}
      sources:
        - {project: p, version: v, file: drivers/infiniband/ulp/ipoib/ipoib_main.c, call: pr_warn,
           format: "%s: failed to initialize device: %s port %d (ret = %d)\n"}
    - id: link-down
      match: {regex: 'Link (?:is )?[Dd]own'}
      benignSources:
        - {project: p, version: v, file: drivers/net/ethernet/mellanox/mlx5/core/en_main.c, call: netdev_info, format: "Link up\n"}
        - {project: p, version: v, file: drivers/net/ethernet/mellanox/mlx5/core/en_main.c, call: netdev_info, format: "Link down\n"}
`

func TestRunSources(t *testing.T) {
	res := packtest.RunSources(engineOf(t, pack))
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	got := map[string]packtest.Result{}
	for _, r := range res {
		got[r.Rule.ID+" "+r.Case] = r
	}
	for name, r := range got {
		switch {
		case strings.HasPrefix(name, "stable-phrase"):
			if !r.OK() {
				t.Errorf("%s failed: %v", name, r.Failures)
			}
		case strings.HasPrefix(name, "pasted-shape"):
			// Generated values include other device words and negative numbers: the
			// pasted shape misses them under every prefix.
			if r.OK() || !strings.Contains(strings.Join(r.Failures, "\n"), "dmesg prefix, values 2: no match") {
				t.Errorf("%s: want failures naming the prefix and values, got %v", name, r.Failures)
			}
		}
	}
	var benignFails int
	for _, r := range res {
		if strings.HasPrefix(r.Case, "benign") && !r.OK() {
			benignFails++
			if !strings.Contains(r.Failures[0], "matches t/link-down (warning)") {
				t.Errorf("benign failure does not name the rule: %v", r.Failures)
			}
		}
	}
	if benignFails != 1 {
		t.Errorf("%d benign sources failed, want 1 (Link down)", benignFails)
	}
}

const companionPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: t}
spec:
  defaults: {source: kernel, severity: warning, action: event}
  rules:
    - id: flap
      match:
        regex: '(?P<ifname>\w+): Link down'
        companion: {regex: '\w+: Link up', position: before, within: {lines: 3}}
      sources:
        - project: p
          version: v
          file: drivers/net/ethernet/mellanox/mlx5/core/en_main.c
          call: netdev_info
          format: "Link down\n"
          captures: {ifname: eth2}
          companion: {project: p, version: v, file: drivers/net/ethernet/mellanox/mlx5/core/en_main.c, call: netdev_info, format: "Link up\n"}
        - {project: p, version: v, file: drivers/net/ethernet/mellanox/mlx5/core/en_main.c, call: netdev_info, format: "Link down\n"}
    - id: built
      source: pod
      match: {regex: 'NCCL error in: \S+:\d+, (?P<reason>[^,]+),'}
      sources:
        - {project: p, version: v, file: NCCLUtils.hpp, kind: concat, line: 20,
           format: "NCCL error in: %s:%u, %s, NCCL version %s", args: {1: "../torch/csrc/distributed/c10d/NCCLUtils.hpp"}, captures: {reason: "$3"}}
`

// A companion rule fires on the pair only: the source that names the companion's
// format passes, the same format without it finds no match; a concat source is
// instantiated like a format.
func TestRunSourcesCompanionAndKinds(t *testing.T) {
	res := packtest.RunSources(engineOf(t, companionPack))
	if len(res) != 3 {
		t.Fatalf("%d results, want 3", len(res))
	}
	if !res[0].OK() {
		t.Errorf("source with companion failed: %v", res[0].Failures)
	}
	if res[1].OK() || !strings.Contains(res[1].Failures[0], "no match") {
		t.Errorf("source without companion: want no match, got %v", res[1].Failures)
	}
	if !res[2].OK() || !strings.Contains(res[2].Case, "concat :20") {
		t.Errorf("concat source: %s %v", res[2].Case, res[2].Failures)
	}
}

func TestSourceKindErrors(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"concat without line": {`{project: p, version: v, file: f.cpp, kind: concat, format: "x %s"}`, "kind concat needs line"},
		"unknown kind":        {`{project: p, version: v, file: f.c, kind: stream, format: "x"}`, `unknown kind "stream"`},
		"companion, no pair":  {`{project: p, version: v, file: f.c, format: "x", companion: {project: p, version: v, file: f.c, format: "y"}}`, "the rule's match has no companion"},
	} {
		doc := "apiVersion: faultline.io/v1\nkind: RulePack\nmetadata: {name: t}\nspec:\n  rules:\n    - id: r\n      match: {regex: 'xyz'}\n      sources:\n        - " + tc.src + "\n"
		_, err := rules.Loader{}.ParseFile("t.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want error %q, got %v", name, tc.want, err)
		}
	}
}

// engineOf compiles a pack's text into an engine.
func engineOf(t *testing.T, text string) *rules.Engine {
	t.Helper()
	ps, err := rules.Loader{}.ParseFile("t.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	return rules.NewEngine(set)
}

const multiLinePack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: t}
spec:
  defaults: {source: kernel, severity: warning, action: event}
  rules:
    - id: spans-lines
      match: {regex: 'installed in this system has\s+fallen off the bus'}
      sources:
        - {project: p, version: v, file: x.c, call: printk,
           format: "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\nNVRM: installed in this system has\nNVRM: fallen off the bus.\n"}
    - id: each-line
      match: {regex: 'NVRM: The NVIDIA GPU [0-9a-f:.]+$|installed in this system has$|fallen off the bus'}
      sources:
        - {project: p, version: v, file: x.c, call: printk,
           format: "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\nNVRM: installed in this system has\nNVRM: fallen off the bus.\n"}
    - id: generic-line-named
      match: {regex: 'BUG: soft lockup - CPU#-?\d+ stuck'}
      sources:
        - {project: p, version: v, file: kernel/watchdog.c, call: printk,
           format: "BUG: soft lockup - CPU#%d stuck for %ds!\nCall Trace:\n", notAlone: {2: "generic backtrace header"}}
    - id: bad-not-alone
      match: {regex: 'soft lockup'}
      sources:
        - {project: p, version: v, file: kernel/watchdog.c, call: printk,
           format: "BUG: soft lockup\n", notAlone: {3: "no such line"}}
`

// TestEachLineAlone: a rule that only matches across the lines of a multi-line
// format fails on each line alone; one that matches every line passes; a line
// named in notAlone is skipped; a notAlone entry past the lines is an error.
func TestEachLineAlone(t *testing.T) {
	got := map[string]packtest.Result{}
	for _, r := range packtest.RunSources(engineOf(t, multiLinePack)) {
		got[r.Rule.ID] = r
	}
	if r := got["spans-lines"]; r.OK() || !strings.Contains(strings.Join(r.Failures, "\n"), "line 3 of 3 alone") {
		t.Errorf("spans-lines: want a failure for line 3 alone, got %v", r.Failures)
	}
	if r := got["each-line"]; !r.OK() {
		t.Errorf("each-line: %v", r.Failures)
	}
	if r := got["generic-line-named"]; !r.OK() {
		t.Errorf("generic-line-named: %v", r.Failures)
	}
	if r := got["bad-not-alone"]; r.OK() || !strings.Contains(strings.Join(r.Failures, "\n"), "notAlone names line 3 of a 1-line format") {
		t.Errorf("bad-not-alone: want the out-of-range notAlone reported, got %v", r.Failures)
	}
}

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
		_, err := rules.ParseFile("t.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want error %q, got %v", name, tc.want, err)
		}
	}
}

// engineOf compiles a pack's text into an engine.
func engineOf(t *testing.T, text string) *rules.Engine {
	t.Helper()
	ps, err := rules.ParseFile("t.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	return rules.NewEngine(set)
}

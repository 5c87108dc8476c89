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
	ps, err := rules.ParseFile("t.yaml", []byte(pack))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	res := packtest.RunSources(rules.NewEngine(set))
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

package rules_test

import (
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

const witnessPacks = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: kern}
spec:
  defaults: {source: kernel, severity: critical, action: taint}
  rules:
    - id: k-lost
      match: {regex: 'Xid .*: (?P<xid>79)'}
---
apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: gpu-events}
spec:
  defaults: {source: nvml, severity: critical, action: taint}
  rules:
    - id: n-lost
      sameFaultAs: k-lost
      match: {regex: 'NVML: Xid (?P<xid>79)'}
`

func compileText(t *testing.T, text string) (*rules.Set, error) {
	t.Helper()
	ps, err := rules.Loader{}.ParseFile("packs.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return rules.Compile(ps)
}

// TestSameFaultAs: a second witness's firings belong to the named rule's fault; with
// that rule disabled the witness stands alone; a chain of witnesses is refused.
func TestSameFaultAs(t *testing.T) {
	set, err := compileText(t, witnessPacks)
	if err != nil {
		t.Fatal(err)
	}
	k, n := set.Rule("kern", "k-lost"), set.Rule("gpu-events", "n-lost")
	if n.FaultRule() != k {
		t.Fatalf("n-lost's fault rule = %v, want kern/k-lost", n.FaultRule())
	}
	if k.FaultRule() != k {
		t.Fatalf("k-lost's fault rule = %v, want itself", k.FaultRule())
	}
	eng := rules.NewEngine(set)
	hits := eng.Match(&logstream.Line{Text: "NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-1)", Source: logstream.SourceNVML}, nil)
	if len(hits) != 1 || hits[0].Rule != n {
		t.Fatalf("nvml line hits = %v, want n-lost", hits)
	}
	if hits := eng.Match(&logstream.Line{Text: "NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-1)", Source: logstream.SourcePod}, nil); len(hits) != 0 {
		t.Fatalf("a pod line that claims to be NVML's fired %v", hits)
	}

	disabled := witnessPacks + `---
apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: site}
spec:
  rules:
    - id: k-lost
      enabled: false
`
	set, err = compileText(t, disabled)
	if err != nil {
		t.Fatal(err)
	}
	n = set.Rule("gpu-events", "n-lost")
	if n.FaultRule() != n {
		t.Fatalf("with k-lost disabled, n-lost's fault rule = %v, want itself", n.FaultRule())
	}

	chain := witnessPacks + `    - id: n-other
      sameFaultAs: n-lost
      match: {regex: 'NVML: Xid (?P<xid>74)'}
`
	if _, err := compileText(t, chain); err == nil || !strings.Contains(err.Error(), `that rule is itself a witness of "k-lost"`) {
		t.Fatalf("chained sameFaultAs: err = %v", err)
	}
}

package rules

import (
	"slices"
	"testing"
	"time"
)

func TestSetQueries(t *testing.T) {
	packs, err := Loader{}.ParseFile("q.yaml", []byte(`apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: q}
spec:
  rules:
  - id: xid
    source: kernel
    match: {regex: 'NVRM: Xid'}
    severity: critical
    action: taint
    threshold: {count: 2, window: 45m}
  - id: nccl
    source: pod
    match: {regex: 'NCCL WARN'}
    severity: warning
    action: event
  - id: any
    source: any
    match: {regex: 'Oops'}
    severity: warning
    action: event
    cooldown: 2h
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := Compile(packs)
	if err != nil {
		t.Fatal(err)
	}
	if r := set.Rule("q", "nccl"); r == nil || r.ID != "nccl" {
		t.Errorf("Rule(q, nccl) = %v", r)
	}
	if r := set.Rule("other", "nccl"); r != nil {
		t.Errorf("Rule(other, nccl) = %v, want nil", r)
	}
	if h := set.Horizon(); h != 2*time.Hour {
		t.Errorf("Horizon = %v, want 2h (the cooldown of any)", h)
	}
	k, ok := set.Literals(SourceKernel)
	if !ok || !slices.Contains(k, "nvrm: xid") || !slices.Contains(k, "oops") || slices.Contains(k, "nccl warn") {
		t.Errorf("Literals(kernel) = %q, %v", k, ok)
	}
	all, _ := set.Literals("")
	if len(all) != 3 {
		t.Errorf("Literals(\"\") = %q, want the 3 rules' literals", all)
	}
}

package match

import (
	"testing"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

func engine(t *testing.T) *rules.Engine {
	t.Helper()
	ps, err := rules.Loader{}.ParseFile("m.yaml", []byte(`apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: m}
spec:
  rules:
    - id: xid79
      source: kernel
      match: {regex: 'Xid \((?P<pci>[^)]*)\): (?P<xid>79)\b'}
      severity: critical
      action: taint
    - id: flap
      source: kernel
      match: {regex: '(?P<dev>\w+): Link down'}
      threshold: {count: 3, window: 10m}
      severity: warning
      action: taint
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	return rules.NewEngine(set)
}

func TestProcess(t *testing.T) {
	e := engine(t)
	s := New(func() *rules.Engine { return e })
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	line := func(node, text string, at time.Duration) Result {
		return s.Process(logstream.Line{Node: node, Source: logstream.SourceKernel, Stream: `{node="` + node + `"}`, Time: t0.Add(at), Text: text})
	}
	r := line("gpu-3", "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", 0)
	if len(r.Faults) != 1 || r.Faults[0].Node != "gpu-3" || r.Faults[0].Captures["xid"] != "79" || len(r.Faults[0].Evidence) != 1 {
		t.Fatalf("xid 79: %+v", r)
	}
	line("gpu-2", "eth0: Link down", time.Second)
	if r := line("gpu-2", "eth0: Link down", 2*time.Second); len(r.Faults) != 0 || len(r.Matches) != 1 {
		t.Fatalf("2 link-downs: %+v", r)
	}
	if r := line("gpu-2", "eth0: Link down", 3*time.Second); len(r.Faults) != 1 || r.Faults[0].Count != 3 || len(r.Faults[0].Evidence) != 3 {
		t.Fatalf("3 link-downs: %+v", r)
	}
	if r := line("", "NVRM: Xid (PCI:0000:3b:00): 79, x", 4*time.Second); len(r.Faults) != 0 || s.Stats.NoNode != 1 {
		t.Fatalf("no node: %+v", r)
	}
}

// The firing line keeps its labels and metadata in the evidence (the boot id the
// ladder's reboots trigger reads); the lines before it are the correlator's.
func TestFiringLineLabels(t *testing.T) {
	e := engine(t)
	s := New(func() *rules.Engine { return e })
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var r Result
	for i, boot := range []string{"boot-1", "boot-1", "boot-2"} {
		r = s.Process(logstream.Line{Node: "gpu-2", Source: logstream.SourceKernel, Stream: `{node="gpu-2"}`, Time: t0.Add(time.Duration(i) * time.Second),
			Text: "eth0: Link down", Labels: map[string]string{logstream.MetaBootID: boot}})
	}
	if len(r.Faults) != 1 || len(r.Faults[0].Evidence) != 3 {
		t.Fatalf("3 link-downs: %+v", r)
	}
	if ev := r.Faults[0].Evidence; ev[2].Labels[logstream.MetaBootID] != "boot-2" {
		t.Errorf("the firing line's boot id: %v", ev[2].Labels)
	}
}

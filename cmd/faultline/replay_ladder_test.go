package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/controller/replay"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/test/testenv"
)

// ladderPack taints a node at an Xid 79; with a ladder, the fault climbs: drain on
// a repeat within 2h, a GPU reset when it fires again after a reboot, service after
// 24h tainted, a remediation once a confirming probe failed.
const ladderPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata:
  name: ladder-test
spec:
  defaults:
    source: kernel
    severity: critical
    action: taint
    taint: {key: faultline.io/faulty, effect: NoSchedule}
    recover: manual
  rules:
    - id: gpu-lost
      description: A GPU fell off the bus
      match:
        regex: 'NVRM: Xid \(PCI:\S+\): 79,'
      probe: {checks: [nvml]}
`

const ladderSteps = `      escalate:
        - {action: drain, repeat: {count: 1, window: 2h}}
        - {action: gpu-reset, reboots: 1}
        - {action: service, taintedFor: 24h}
        - {action: remediate, probeFailed: true, template: reboot}
`

func writeFile(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pack.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReplayLadderAndFleet seeds a real Loki with a month in which one node's GPU
// falls off the bus again and again, across a reboot, and the six nodes of rack A
// (and one of rack B) flap their links at once, and replays it against a real API
// server whose Nodes carry rack labels.
func TestReplayLadderAndFleet(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kubernetes: true, Loki: true})
	ctx := context.Background()
	const rackLabel = "topology.kubernetes.io/rack"
	var rackA []string
	nodes := map[string]string{"x-0": "", "x-1": "", "b-0": "b"}
	for i := range 6 {
		rackA = append(rackA, fmt.Sprintf("a-%d", i))
		nodes[rackA[i]] = "a"
	}
	for name, rack := range nodes {
		labels := map[string]string{"nvidia.com/gpu.present": "true"}
		if rack != "" {
			labels[rackLabel] = rack
		}
		if _, err := e.Clientset().CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	end := time.Now().Truncate(time.Hour)
	day := func(d int, hhmm time.Duration) time.Time {
		return end.Add(-30 * 24 * time.Hour).Add(time.Duration(d)*24*time.Hour + hhmm)
	}
	streams := map[string][]push.Entry{}
	xid := func(node string, at time.Time, boot string) {
		streams[node] = append(streams[node], push.Entry{Timestamp: at, Line: "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
			StructuredMetadata: push.LabelsAdapter{{Name: logstream.MetaBootID, Value: boot}}})
	}
	// x-0: fallen off the bus at 10:00 (tainted), again at 10:30 (a repeat within
	// 2h: drain), and after a reboot at 14:00 (gpu-reset); a day after the taint,
	// still tainted (recover: manual): service.
	xid("x-0", day(3, 10*time.Hour), "boot-1")
	xid("x-0", day(3, 10*time.Hour+30*time.Minute), "boot-1")
	xid("x-0", day(3, 14*time.Hour), "boot-2")
	// x-1: once: tainted, no step.
	xid("x-1", day(10, 12*time.Hour), "boot-7")
	// Rack A and b-0: three link-downs within 10 minutes each, one node a minute.
	for i, n := range append(slices.Clone(rackA), "b-0") {
		for k := range 3 {
			streams[n] = append(streams[n], push.Entry{Timestamp: day(5, 5*time.Hour+time.Duration(i+2*k)*time.Minute),
				Line: "mlx5_core 0000:0c:00.0 ibp12s0: Link down"})
		}
	}
	var ps []push.Stream
	for n, es := range streams {
		slices.SortFunc(es, func(a, b push.Entry) int { return a.Timestamp.Compare(b.Timestamp) })
		ps = append(ps, push.Stream{Labels: fmt.Sprintf(`{%s=%q, %s=%q}`, logstream.LabelNode, n, logstream.LabelSource, logstream.SourceKernel), Entries: es})
	}
	if err := testenv.PushLoki(e.LokiURL(), ps); err != nil {
		t.Fatal(err)
	}

	laddered, flat := writeFile(t, ladderPack+ladderSteps), writeFile(t, ladderPack)
	links := writePack(t, 3, "manual")
	args := func(format string, extra ...string) []string {
		return append([]string{"replay", "--loki-url", e.LokiURL(), "--kubeconfig", e.Kubeconfig(), "--no-default-packs",
			"--since", "721h", "--until", end.Add(time.Hour).Format(time.RFC3339), "--step", "24h", "--format", format,
			"--budget-percent", "100", "--no-storm-hold"}, extra...)
	}
	replayJSON := func(t *testing.T, extra ...string) replay.Report {
		t.Helper()
		out, err := run(t, "", args("json", extra...)...)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		var rep replay.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("replay JSON: %v\n%s", err, out)
		}
		return rep
	}
	// rows lists a node's rows of one side as "outcome step first".
	rows := func(res *replay.Result, node string) []string {
		var out []string
		for _, a := range res.Actions {
			if a.Node == node {
				out = append(out, fmt.Sprintf("%s %s %s", a.Outcome, a.Step, a.First.UTC().Format(time.RFC3339)))
			}
		}
		return out
	}
	utc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }

	t.Run("a repeated Xid climbs the ladder", func(t *testing.T) {
		rep := replayJSON(t, "--packs", laddered, "--packs", links, "--baseline", flat, "--baseline", links)
		want := []string{
			"escalate 1 drain " + utc(day(3, 10*time.Hour+30*time.Minute)),
			"escalate 2 gpu-reset " + utc(day(3, 14*time.Hour)),
			"escalate 3 service (assumed) " + utc(day(4, 10*time.Hour)),
			"needs-probe 4 remediate " + utc(day(4, 10*time.Hour)),
			"taint - " + utc(day(3, 10*time.Hour)),
		}
		if got := rows(rep.Candidate.Result, "x-0"); !slices.Equal(got, want) {
			t.Errorf("x-0 in the candidate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if got := rows(rep.Baseline.Result, "x-0"); !slices.Equal(got, want[4:]) {
			t.Errorf("x-0 without the ladder: %v, want the taint alone", got)
		}
		if got := rows(rep.Candidate.Result, "x-1"); len(got) != 1 || !strings.HasPrefix(got[0], "taint - ") {
			t.Errorf("x-1 fired once: %v, want its taint and no step", got)
		}
		var only []string
		for _, r := range rep.Diff {
			if r.In != replay.Both {
				only = append(only, string(r.In)+" "+r.Node+" "+string(r.Outcome)+" "+r.Step.String())
			}
		}
		if w := []string{"candidate x-0 escalate 1 drain", "candidate x-0 escalate 2 gpu-reset", "candidate x-0 escalate 3 service (assumed)",
			"candidate x-0 needs-probe 4 remediate"}; !slices.Equal(only, w) {
			t.Errorf("one-sided rows %v, want %v", only, w)
		}
		same := replayJSON(t, "--packs", laddered, "--packs", links, "--baseline", laddered, "--baseline", links)
		if same.Changed() {
			t.Errorf("same packs, a diff: %+v %+v", same.Diff, same.Fleets)
		}
	})

	t.Run("a rack's link flaps are one fleet fault", func(t *testing.T) {
		rep := replayJSON(t, "--packs", links, "--baseline", links)
		if rep.Fleet.Grouped != 7 {
			t.Errorf("%d nodes with topology labels, want 7", rep.Fleet.Grouped)
		}
		res := rep.Candidate.Result
		if len(res.Fleets) != 1 || res.Fleets[0].Group.String() != rackLabel+"=a" || res.Fleets[0].Family != "replay-test" ||
			!slices.Equal(res.Fleets[0].Members, rackA) || !res.Fleets[0].Since.Equal(day(5, 5*time.Hour+6*time.Minute)) {
			t.Fatalf("fleet faults %+v, want one of rack a, pack replay-test, its six nodes, from a-2's firing", res.Fleets)
		}
		// The two nodes that fired before the fleet fault was raised are tainted, as
		// in the controller; the other four wait for a verdict; b-0 is a node fault.
		if got := res.Nodes(replay.OutcomeTaint); !slices.Equal(got, []string{"a-0", "a-1", "b-0"}) {
			t.Errorf("tainted %v, want a-0, a-1 and b-0", got)
		}
		if got := res.Nodes(replay.HoldOutcome("fleet")); !slices.Equal(got, rackA[2:]) {
			t.Errorf("held for the fleet fault %v, want %v", got, rackA[2:])
		}
		if len(rep.Fleets) != 1 || rep.Fleets[0].In != replay.Both || rep.Changed() {
			t.Errorf("same packs: fleet rows %+v, changed %v", rep.Fleets, rep.Changed())
		}

		// The same lines, nodes without the topology label: seven node taints.
		flat := replayJSON(t, "--packs", links, "--baseline", links, "--fleet-label", "example.com/no-such-label")
		if got := flat.Candidate.Result.Nodes(replay.OutcomeTaint); !slices.Equal(got, append(slices.Clone(rackA), "b-0")) {
			t.Errorf("without topology labels tainted %v, want rack A and b-0", got)
		}
		if n := len(flat.Candidate.Result.Fleets); n != 0 || flat.Fleet.Grouped != 0 {
			t.Errorf("without topology labels: %d fleet faults, %d grouped nodes", n, flat.Fleet.Grouped)
		}
	})

	t.Run("table", func(t *testing.T) {
		// Relative directories, as an operator names them (docs/replay.md shows the
		// output).
		dir := t.TempDir()
		for name, text := range map[string]string{"current": ladderPack, "candidate": ladderPack + ladderSteps,
			"network": fmt.Sprintf(replayPack, "manual", 3)} {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name, "pack.yaml"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Chdir(dir)
		sets := []string{"--packs", "candidate", "--packs", "network", "--baseline", "current", "--baseline", "network"}
		out, err := run(t, "", args("table", sets...)...)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		t.Logf("\n%s", out)
		for _, want := range []string{"STEP", "FLEET GROUP", "both  " + rackLabel + "=a", "a-0,a-1,a-2,a-3,a-4,a-5",
			"candidate  x-0   ladder-test/gpu-lost   escalate     3 service (assumed)", "needs-probe  4 remediate"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q", want)
			}
		}
		js, err := run(t, "", args("json", sets...)...)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, js)
		}
		t.Logf("\n%s", js)
	})
}

package proberunctl

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/proberun"
)

func TestSplit(t *testing.T) {
	nodes := make([]string, 450)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("gpu-%d", i)
	}
	parts := split(nodes, 200)
	if len(parts) != 3 || len(parts[0]) != 200 || len(parts[1]) != 200 || len(parts[2]) != 50 || parts[2][49] != "gpu-449" {
		t.Fatalf("450 nodes by 200: %d parts", len(parts))
	}
	if parts := split(nodes[:200], 200); len(parts) != 1 {
		t.Errorf("200 nodes by 200: %d parts, want 1", len(parts))
	}
	if parts := split(nil, 200); len(parts) != 1 || len(parts[0]) != 0 {
		t.Errorf("no nodes: %v, want one empty part", parts)
	}
	// Appending to a part never writes into the next one.
	a := split(nodes[:4], 2)
	_ = append(a[0], "x")
	if a[1][0] != "gpu-2" {
		t.Errorf("parts share their array: %v", a)
	}
}

// result is one check's result on a node with eight GPUs: with big, every field
// larger than any check fills it; else as an nvml check that passed.
func result(check string, big bool) probe.Result {
	n, text := 6, "8 GPUs, driver 550.54.15"
	if big {
		n, text = 12, strings.Repeat("x", 256)
	}
	values, params := map[string]float64{}, probe.Params{}
	for i := 0; i < n; i++ {
		values[fmt.Sprintf("value_number_%d", i)] = 123456.789
		params[fmt.Sprintf("param_%d", i)] = "some-value"
	}
	res := probe.Result{Check: check, Status: probe.StatusPass, Message: text, Values: values, Params: params, Started: time.Now(), Duration: time.Second}
	for g := 0; g < 8; g++ {
		d := probe.DeviceResult{ID: fmt.Sprint(g), Status: probe.StatusPass, Values: values}
		if big {
			d.Status, d.Message, d.Failed = probe.StatusFail, text, []string{"memtest", "pcie"}
		}
		res.Devices = append(res.Devices, d)
	}
	if big {
		res.Status = probe.StatusFail
	}
	return res
}

// recordBytes is the JSON size of the records a Recorder makes of a run of
// checks over nodes, each node's part made by nodeRun.
func recordBytes(t *testing.T, trig proberun.Trigger, checks []string, nodes int, nodeRun func(node string) proberun.NodeRun) (records, largest, total int) {
	t.Helper()
	var names []string
	for n := 0; n < nodes; n++ {
		names = append(names, fmt.Sprintf("gpu-node-with-a-long-name-%05d.rack-17.datacenter-west.example.com", n))
	}
	for _, chunk := range split(names, max(1, v1alpha1.MaxRecordResults/len(checks))) {
		pr := &v1alpha1.ProbeRun{Spec: v1alpha1.ProbeRunSpec{Nodes: chunk, Checks: checks, Trigger: string(trig), Reason: strings.Repeat("r", 512)}}
		results := map[string]proberun.NodeRun{}
		for _, node := range chunk {
			nr := nodeRun(node)
			if compact(trig) {
				nr = brief(nr)
			}
			results[node] = nr
		}
		fill(pr, chunk, results, v1alpha1.ReasonStarted, "faultline-controller-0")
		b, err := json.Marshal(pr)
		if err != nil {
			t.Fatal(err)
		}
		records, largest, total = records+1, max(largest, len(b)), total+len(b)
	}
	return records, largest, total
}

// A record stays well under etcd's limit on an object (1.5 MiB) with results
// larger than any check gives: four checks a node, each with eight failed GPUs,
// long messages, many values and parameters. A scheduled round over 20,000 nodes
// that pass is a few MiB in all.
func TestRecordSize(t *testing.T) {
	const limit = 3 << 19 // 1.5 MiB
	checks := []string{"nvml", "pciebw", "dgemm", "dcgm"}
	now := time.Now()
	n, largest, _ := recordBytes(t, proberun.TriggerDeep, checks, 500, func(node string) proberun.NodeRun {
		nr := proberun.NodeRun{Node: node, Status: probe.StatusFail, Started: now, Finished: now, Error: strings.Repeat("e", 256)}
		for _, c := range checks {
			nr.Results = append(nr.Results, result(c, true))
		}
		return nr
	})
	t.Logf("4 failed checks on 500 nodes: %d records, the largest %d KiB (etcd's limit %d KiB)", n, largest>>10, limit>>10)
	if largest > limit*2/3 {
		t.Errorf("a record is %d bytes, over two thirds of etcd's limit", largest)
	}

	pass := func(node string) proberun.NodeRun {
		return proberun.NodeRun{Node: node, Status: probe.StatusPass, Started: now, Finished: now, Results: []probe.Result{result("nvml", false)}}
	}
	n, largest, total := recordBytes(t, proberun.TriggerSchedule, []string{"nvml"}, 20000, pass)
	_, _, full := recordBytes(t, proberun.TriggerRule, []string{"nvml"}, 20000, pass)
	t.Logf("a scheduled nvml round over 20,000 nodes that pass: %d records, the largest %d KiB, %d MiB in all (%d MiB with every value)",
		n, largest>>10, total>>20, full>>20)
	if n != 200 || total > 8<<20 {
		t.Errorf("a scheduled round over 20,000 nodes: %d records, %d bytes; want 200, at most 8 MiB", n, total)
	}
}

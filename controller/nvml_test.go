package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/test/testenv"
)

// nvmlXid79 is the probe agent's line for an Xid 79 seen through NVML, in the wording
// of nvmlevents.FormatXid (rules/packs/nvml_test.go holds the packs to it). Written
// out rather than imported: this package links the drain helper (Go's plugin
// package), so its test binary must link no go-nvml, which nvmlevents brings.
const nvmlXid79 = "NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-5c1a9d3e-7f2b-4c1d-9a8e-0b6f3e2d1c4a)"

// TestNVMLSecondWitness: an Xid 79 seen only by NVML ({source="nvml"}) taints the
// node as the kernel's line would, under the kernel rule's fault; seen by both NVML
// and the kernel on one node, it is one NodeFault, not two.
func TestNVMLSecondWitness(t *testing.T) {
	cl := newCluster(t, "gpu-0", "gpu-1", "gpu-2", "gpu-3")
	r := cl.start(options{decide: decide.Config{MaxPercent: 100}})
	now := time.Now()
	pushNVML := func(node string, at time.Time, line string) {
		t.Helper()
		err := testenv.PushLoki(cl.loki, []push.Stream{{Labels: fmt.Sprintf(`{node=%q, source=%q}`, node, logstream.SourceNVML),
			Entries: []push.Entry{{Timestamp: at, Line: line}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	pushNVML("gpu-1", now, nvmlXid79)
	cl.push("gpu-2", now, xid79)
	pushNVML("gpu-2", now.Add(time.Millisecond), nvmlXid79)

	cl.waitFor("gpu-1 tainted", 20*time.Second, func() bool { return cl.tainted("gpu-1") })
	cl.waitFor("gpu-2 tainted", 20*time.Second, func() bool { return cl.tainted("gpu-2") })
	if tn := cl.faultTaints("gpu-1")[0]; tn.Value != "xid-gpu-lost" {
		t.Errorf("gpu-1 taint %+v, want the kernel rule's (value xid-gpu-lost)", tn)
	}
	// Both NVML lines were read before the NodeFaults are counted.
	cl.waitFor("the NVML lines read", 20*time.Second, func() bool {
		return testutil.ToFloat64(r.m.LinesRead().WithLabelValues(logstream.SourceNVML)) >= 2
	})

	records, err := nodefault.New(cl.cs, nodefault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The taint is placed first and the evidence written with the status that
	// records it, one request later: wait for that write rather than racing it.
	var nf *v1alpha1.NodeFault
	cl.waitFor("gpu-1's NodeFault with the NVML line as evidence", 20*time.Second, func() bool {
		nf, err = records.Get(ctx, nodefault.Name("gpu-1", "nvidia-xid", "xid-gpu-lost"))
		return err == nil && len(nf.Status.Evidence) > 0 && nf.Status.Evidence[len(nf.Status.Evidence)-1].Text == nvmlXid79
	})
	all, err := records.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string][]string{}
	for _, f := range all {
		perNode[f.Spec.Node] = append(perNode[f.Spec.Node], f.Name)
		if strings.Contains(f.Name, "nvml-events") {
			t.Errorf("NodeFault %s: an NVML witness got a fault of its own", f.Name)
		}
	}
	for _, n := range []string{"gpu-1", "gpu-2"} {
		if want := []string{nodefault.Name(n, "nvidia-xid", "xid-gpu-lost")}; fmt.Sprint(perNode[n]) != fmt.Sprint(want) {
			t.Errorf("%s NodeFaults %v, want %v", n, perNode[n], want)
		}
	}
	if len(perNode["gpu-0"])+len(perNode["gpu-3"]) != 0 {
		t.Errorf("NodeFaults on healthy nodes: %v", perNode)
	}
}

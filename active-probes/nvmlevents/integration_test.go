//go:build cgo

package nvmlevents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestIntegrationXidReachesLoki: an Xid 79 injected into go-nvml's mock goes through
// the exporter's lane and the real, authenticating OpenTelemetry Collector (the
// probe agent's pod-bound ServiceAccount token) into the real Loki, where the
// controller's kind of query, {source="nvml"}, finds it on the token's node.
func TestIntegrationXidReachesLoki(t *testing.T) {
	const (
		namespace = "faultline"
		agentSA   = "faultline-probe-agent"
		node      = "gpu-nvml-1"
	)
	env := testenv.Start(t, testenv.Options{CollectorAuth: &testenv.CollectorAuth{
		ServiceAccounts: []string{namespace + "/" + agentSA},
	}})
	tokenFile := filepath.Join(t.TempDir(), "token")
	token := env.PodToken(t, namespace, agentSA, node, []string{testenv.CollectorAudience})
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := ship.Auth{TokenFile: tokenFile}.Client()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lane, err := exporter.NewLane(ship.SourceNVML, exporter.Config{
		Sender:    ship.NewOTLP(env.OTLPEndpoint(), ship.OTLPOptions{Gzip: true, Client: client}),
		BatchWait: 50 * time.Millisecond, Metrics: exporter.NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	laneDone := make(chan error, 1)
	go func() { laneDone <- lane.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-laneDone; err != nil {
			t.Errorf("lane: %v", err)
		}
	})

	box := newGPUBox(t)
	runWatcher(t, box.srv, Config{Ship: func(ctx context.Context, l Line) bool {
		l.Time = time.Now() // Loki refuses the fixed test time as too old
		return lane.Ship(ctx, l.Record(node))
	}})
	box.inject(2, nvml.EventTypeXidCriticalError, 79, noInstance)

	uuid, _ := box.devices[2].GetUUID()
	want := fmt.Sprintf("NVML: Xid 79 on GPU 0000:47:00.0 (%s)", uuid)
	got := testenv.WaitLoki(t, env.LokiURL(), `{source="nvml"} |= "NVML: Xid"`, 1, 30*time.Second)
	if len(got) != 1 || got[0].Line != want {
		t.Fatalf("Loki holds %+v, want one line %q", got, want)
	}
	e := got[0]
	for k, v := range map[string]string{"source": "nvml", "node": node, "k8s_node_name": node} {
		if e.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, e.Labels[k], v, e.Labels)
		}
	}
	for k, v := range map[string]string{"log_source": "nvml", "severity_text": "ERROR"} {
		if e.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q (metadata %v)", k, e.Metadata[k], v, e.Metadata)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP faultline_exporter_records_shipped_total Records acknowledged by the receiver, by source.
# TYPE faultline_exporter_records_shipped_total counter
faultline_exporter_records_shipped_total{source="nvml"} 1
`), "faultline_exporter_records_shipped_total"); err != nil {
		t.Error(err)
	}
}

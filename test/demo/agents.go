package demo

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/active-probes/probelines"
	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/test/testenv"
)

// machine is what the demo simulates of one node besides its kernel log: the
// kubelet's PodResources API, which tells the node's probe agent which pods hold its
// GPUs, and a GPU that can fall off the bus.
type machine struct {
	kubelet *testenv.PodResources
	lost    atomic.Bool
	// cert is the agent's own serving certificate, requested through the CSR API
	// and signed by the controller.
	cert certificate.Manager
}

// agentSetup is what every node's agent shares.
type agentSetup struct {
	client   kubernetes.Interface // the agent's ServiceAccount
	commands map[string]string    // ping, iperf3 and the GPU programs' stand-ins
	otlp     string               // where the verdict lines go: the collector
	// lineToken is the file of the node's token for the collector.
	lineToken string
	// certDir keeps the agent's key and certificate.
	certDir string
	log     io.Writer
}

// startAgent serves a probe agent for node on 127.0.0.1, talking to the apiserver as
// the agent's ServiceAccount, as the chart runs it: it asks the node's kubelet which
// pods hold GPUs (refusing invasive checks while any does), places the probing taint
// while one runs, and ships the verdict of every check as a source="probe" line to
// the collector. It serves HTTPS only, with a certificate of its own node that it
// requests through the CSR API (the controller signs it and checks the node's name
// when it calls), and accepts only tokens for the agents' audience. Its nvml check
// reads go-nvml's DGX A100 mock (see nvml_cgo.go);
// ping and iperf3 are the real programs; pciebw is the stand-in that prints a
// recorded output (commands).
func startAgent(ctx context.Context, node string, m *machine, s agentSetup) (string, func(), error) {
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewJSONHandler(s.log, nil)).With("component", "probe-agent", "node", node)
	lineClient, err := (ship.Auth{TokenFile: s.lineToken}).Client()
	if err != nil {
		return "", nil, err
	}
	lane, err := exporter.NewLane(logstream.SourceProbe, exporter.Config{Sender: ship.NewOTLP(s.otlp, ship.OTLPOptions{Gzip: true, Client: lineClient}),
		BatchWait: 200 * time.Millisecond, Metrics: exporter.NewMetrics(reg), Log: log})
	if err != nil {
		return "", nil, err
	}
	verdicts, err := probelines.New(probelines.Config{Node: node, Ship: lane.Ship, Metrics: probelines.NewMetrics(reg), Log: log})
	if err != nil {
		return "", nil, err
	}
	runner := probe.NewRunner(demoRegistry(&m.lost), probe.Config{Node: node, Commands: s.commands}, probe.NewMetrics(reg))
	if m.cert, err = agent.NodeCertificate(s.client, node, s.certDir, log); err != nil {
		return "", nil, err
	}
	m.cert.Start()
	ag, err := agent.New(agent.Config{Node: node, Runner: runner, Registerer: reg,
		Auth:    &kubeauth.Reviewer{Client: s.client, Audiences: []string{agentapi.TokenAudience}},
		GPUPods: agent.KubeletGPUPods(agent.GPUResources{Socket: m.kubelet.Socket}),
		Nodes:   s.client, Verdicts: verdicts,
		// Every agent listens on loopback, so their peers are loopback addresses.
		Allow: probe.AllowList{PeerPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Log:   log})
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", ag.Handler())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(tls.NewListener(ln, agent.ManagedTLS(m.cert)))
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = lane.Run(ctx) }()
	go func() { defer wg.Done(); verdicts.Run(ctx) }()
	return "https://" + ln.Addr().String(), func() {
		_ = srv.Shutdown(context.Background())
		ag.Close()
		m.cert.Stop()
		cancel()
		wg.Wait()
	}, nil
}

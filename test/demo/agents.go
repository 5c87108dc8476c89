package demo

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/kubeauth"
)

// startAgent serves a probe agent for node on 127.0.0.1, talking to the apiserver as
// the agent's ServiceAccount. Its nvml check reads go-nvml's DGX A100 mock (see
// nvml_cgo.go); ping and iperf3 are the real programs.
func startAgent(ctx context.Context, node string, client kubernetes.Interface, commands map[string]string, logw io.Writer) (string, func(), error) {
	reg := prometheus.NewRegistry()
	runner := probe.NewRunner(demoRegistry(), probe.Config{Node: node, Commands: commands}, probe.NewMetrics(reg))
	ag, err := agent.New(agent.Config{Node: node, Runner: runner, Registerer: reg,
		Auth: &kubeauth.Reviewer{Client: client},
		// Every agent listens on loopback, so their peers are loopback addresses.
		Allow: probe.AllowList{PeerPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Log:   slog.New(slog.NewJSONHandler(logw, nil)).With("component", "probe-agent")})
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
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { _ = srv.Shutdown(context.Background()); ag.Close() }, nil
}

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/kubeauth"
)

func newProbeAgentCmd() *cobra.Command {
	var (
		cfg        probe.Config
		listen     string
		kubeconfig string
		commands   []string
		audiences  []string
		timeouts   []string
		events     nvmlEventFlags
		certFile   string
		keyFile    string
	)
	cmd := &cobra.Command{
		Use:   "probe-agent",
		Short: "Run active probes on this node when the controller or an admin asks (HTTP API)",
		Long: `Serves the probe API of one node (see docs/probes.md): GET /api/v1/checks,
POST /api/v1/run (the iperf3-server check serves a peer), plus /metrics and /healthz.
Every API request must carry a bearer token; the agent checks it with a TokenReview
and authorizes the caller with a SubjectAccessReview (verb create on probes.faultline.io,
resource name = this node). One invasive probe runs at a time, and invasive probes
refuse to run while pods on the node hold nvidia.com/gpu unless the request says force.
With --nvml-events it also watches the GPUs' NVML events (Xid, ECC, clock, power
source) and ships each as a log line with source="nvml" through the dmesg-exporter's
shipping path, a second witness beside the kernel log (docs/probes.md).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Node == "" {
				cfg.Node = envOr("NODE_NAME", "")
			}
			if cfg.Node == "" {
				return fmt.Errorf("set --node or $NODE_NAME")
			}
			if err := events.check(); err != nil {
				return err
			}
			cfg.Commands = map[string]string{}
			for _, c := range commands {
				name, path, ok := strings.Cut(c, "=")
				if !ok || name == "" || path == "" {
					return fmt.Errorf("--command %q: want name=path", c)
				}
				cfg.Commands[name] = path
			}
			log := slog.New(slog.NewJSONHandler(cmd.OutOrStdout(), nil)).With("component", "probe-agent")
			client, err := kubeClient(kubeconfig)
			if err != nil {
				return err
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			runner := probe.NewRunner(nil, cfg, probe.NewMetrics(reg))
			for _, t := range timeouts {
				name, v, ok := strings.Cut(t, "=")
				d, err := time.ParseDuration(v)
				if !ok || err != nil {
					return fmt.Errorf("--timeout %q: want check=duration", t)
				}
				if _, known := runner.Registry().Get(name); !known {
					return fmt.Errorf("--timeout %q: unknown check", t)
				}
				runner.SetTimeout(name, d)
			}
			ag, err := agent.New(agent.Config{Node: cfg.Node, Runner: runner, Registerer: reg, Log: log,
				Auth:    &kubeauth.Reviewer{Client: client, Audiences: audiences},
				GPUPods: agent.KubeGPUPods(client, cfg.Node)})
			if err != nil {
				return err
			}
			defer ag.Close()
			ev, err := events.start(cmd.Context(), cfg.Node, cfg.NVMLLibrary, reg, log)
			if err != nil {
				return err
			}
			defer ev.stop()
			// The API, /metrics and /healthz share the port: with a certificate, all of
			// it is HTTPS, so the controller's token never crosses the network in clear.
			var tlsConf *tls.Config
			if certFile != "" || keyFile != "" {
				if tlsConf, err = agent.ServerTLS(certFile, keyFile); err != nil {
					return err
				}
			} else {
				log.Warn("serving plain HTTP: callers' bearer tokens cross the network in clear (set --tls-cert-file and --tls-key-file)")
			}
			// /healthz is the agent's liveness and readiness: a collector refusing the
			// event lines must neither restart the agent nor stop its probes, so that
			// has an endpoint of its own (and faultline_exporter_receiver_refusing).
			srv, err := serveHTTP(listen, tlsConf, reg, map[string]func() error{"/healthz": func() error { return nil },
				"/healthz/nvml-events": ev.healthy}, ag.Handler())
			if err != nil {
				return err
			}
			defer srv.Shutdown(context.Background())
			log.Info("probe-agent started", "node", cfg.Node, "listen", srv.Addr, "tls", tlsConf != nil, "checks", runner.Registry().DefaultEnabled())
			<-cmd.Context().Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Node, "node", "", "this node's name (default $NODE_NAME)")
	f.StringVar(&listen, "listen", fmt.Sprintf(":%d", agent.DefaultPort), "address of the API, /metrics and /healthz")
	f.StringVar(&certFile, "tls-cert-file", "", "serving certificate (PEM; read again every minute): the API, /metrics and /healthz are then HTTPS")
	f.StringVar(&keyFile, "tls-key-file", "", "key of --tls-cert-file")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig for token and access reviews (default $KUBECONFIG, then in-cluster)")
	f.StringSliceVar(&audiences, "token-audience", nil, "accept only bearer tokens for these audiences (the chart: "+agent.TokenAudience+"); default the apiserver's")
	f.StringArrayVar(&commands, "command", nil, "path of a probe program, name=path (pciebw, dgemm, dcgmi, iperf3, ping); default: the name in $PATH")
	f.StringArrayVar(&timeouts, "timeout", nil, "override a check's timeout, check=duration (repeatable)")
	f.StringVar(&cfg.NVMLLibrary, "nvml-library", "", "path of libnvidia-ml.so.1 (default: the dynamic loader's search path)")
	f.StringVar(&cfg.SysfsRoot, "sysfs-root", "", "where sysfs is mounted (default /sys)")
	events.add(f)
	return cmd
}

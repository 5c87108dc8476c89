package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/internal/buildinfo"
	"github.com/faultline-dev/faultline/internal/daemon"
	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/logstream"
)

// newRoot is the probe agent's command: the program is the agent.
func newRoot() *cobra.Command {
	var (
		cfg        probe.Config
		listen     string
		kubeconfig string
		commands   []string
		audiences  []string
		timeouts   []string
		lines      lineFlags
		certFile   string
		keyFile    string
		certDir    string
		certReq    agent.NodeCertRequest
		gpus       agent.GPUResources
		peers      []string
		ports      []string
		peerNodes  string
		allow      probe.AllowList
		runsPerMin int
		reviews    float64
	)
	cmd := &cobra.Command{
		Use:   "faultline-probe-agent",
		Short: "Run active probes on this node when the controller or an admin asks (HTTP API)",
		Args:  cobra.NoArgs,
		Long: `Serves the probe API of one node (see docs/probes.md): GET /api/v1/checks,
POST /api/v1/run (the iperf3-server check serves a peer), plus /metrics and /healthz.
Every API request must carry a bearer token; the agent checks it with a TokenReview
and authorizes the caller with a SubjectAccessReview (verb create on probes.faultline.io,
resource name = this node). One invasive probe runs at a time; invasive probes refuse
to run while containers on the node hold GPU devices (the kubelet's PodResources API:
device-plugin resources and DRA devices) unless the request says force, and the node
carries the faultline.io/probing:NoSchedule taint while one runs. Parameters that name
hosts or files must be on the allow-lists (--allow-*, --peer-node-selector); runs,
iperf3 servers and token reviews are rate limited (429).
With --nvml-events it also watches the GPUs' NVML events (Xid, ECC, clock, power
source) and ships each as a log line with source="nvml" through the dmesg-exporter's
shipping path, a second witness beside the kernel log (docs/probes.md). With a
receiver (--events-otlp-endpoint or --events-loki-url) it ships the verdict of every
check it runs as a line with source="probe" too (--verdict-lines), so rule packs
can act on scheduled checks' failures.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Node == "" {
				cfg.Node = os.Getenv("NODE_NAME")
			}
			if cfg.Node == "" {
				return fmt.Errorf("set --node or $NODE_NAME")
			}
			if err := lines.check(); err != nil {
				return err
			}
			var err error
			if cfg.Commands, err = commandPaths(commands); err != nil {
				return err
			}
			log := slog.New(slog.NewJSONHandler(cmd.OutOrStdout(), nil)).With("component", "probe-agent")
			client, err := daemon.KubeClient(kubeconfig)
			if err != nil {
				return err
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			for _, p := range peers {
				if err := allowPeer(&allow, p); err != nil {
					return err
				}
			}
			allow.PeerNodes = agent.KubePeerNodes(client, peerNodes)
			for _, p := range ports {
				r, err := probe.ParsePortRange(p)
				if err != nil {
					return fmt.Errorf("--allow-port: %w", err)
				}
				allow.Ports = append(allow.Ports, r)
			}
			var gpuPods agent.GPUPods // none: invasive probes need force
			if gpus.Socket != "" {
				gpuPods = agent.KubeletGPUPods(gpus)
			}
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
			shipped, err := lines.start(cmd.Context(), cfg.Node, cfg.NVMLLibrary, reg, log)
			if err != nil {
				return err
			}
			defer shipped.stop()
			ag, err := agent.New(agent.Config{Node: cfg.Node, Runner: runner, Registerer: reg, Log: log,
				Auth:    &kubeauth.Reviewer{Client: client, Audiences: audiences, ReviewsPerSecond: reviews},
				GPUPods: gpuPods, Nodes: client, Allow: allow, RunsPerMinute: runsPerMin, Verdicts: shipped.verdictSink()})
			if err != nil {
				return err
			}
			defer ag.Close()
			// The API, /metrics and /healthz share the port: with a certificate, all of
			// it is HTTPS, so the controller's token never crosses the network in clear.
			var tlsConf *tls.Config
			if certDir != "" {
				if certFile != "" || keyFile != "" {
					return errors.New("--node-cert-dir or --tls-cert-file and --tls-key-file, not both")
				}
				// The node's own certificate through the CSR API, from the controller
				// or from the signer it approves for (--node-cert-signer).
				m, err := agent.RequestNodeCertificate(client, cfg.Node, certDir, certReq, log)
				if err != nil {
					return err
				}
				m.Start()
				defer m.Stop()
				tlsConf = agent.ManagedTLS(m)
			} else if certReq.SignerName != agentapi.SignerName || certReq.Lifetime != 0 {
				return errors.New("--node-cert-signer and --node-cert-lifetime go with --node-cert-dir")
			} else if certFile != "" || keyFile != "" {
				if tlsConf, err = agent.ServerTLS(certFile, keyFile); err != nil {
					return err
				}
			} else {
				log.Warn("serving plain HTTP: callers' bearer tokens cross the network in clear (set --node-cert-dir, or --tls-cert-file and --tls-key-file)")
			}
			// A taint left by an agent that ended mid-probe; until it is gone, invasive
			// runs would only add and remove it again.
			go removeStaleProbingTaint(cmd.Context(), ag, log)
			// /healthz is the agent's liveness and readiness: a collector refusing the
			// agent's lines must neither restart the agent nor stop its probes, so each
			// source has an endpoint of its own (and faultline_exporter_receiver_refusing).
			srv, err := daemon.ServeHTTP(listen, tlsConf, reg, map[string]func() error{"/healthz": func() error { return nil },
				"/healthz/nvml-events":   shipped.healthy(logstream.SourceNVML),
				"/healthz/verdict-lines": shipped.healthy(logstream.SourceProbe)}, ag.Handler())
			if err != nil {
				return err
			}
			defer srv.Shutdown(context.Background())
			log.Info("probe-agent started", "node", cfg.Node, "listen", srv.Addr, "tls", tlsConf != nil, "checks", runner.Registry().DefaultEnabled())
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.AddCommand(newCheckCmd(), newEventsCmd())
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.Version = buildinfo.Version()
	f := cmd.Flags()
	f.StringVar(&cfg.Node, "node", "", "this node's name (default $NODE_NAME)")
	f.StringVar(&listen, "listen", fmt.Sprintf(":%d", agentapi.DefaultPort), "address of the API, /metrics and /healthz")
	f.StringVar(&certFile, "tls-cert-file", "", "serving certificate (PEM; read again every minute): the API, /metrics and /healthz are then HTTPS")
	f.StringVar(&keyFile, "tls-key-file", "", "key of --tls-cert-file")
	f.StringVar(&certDir, "node-cert-dir", "", "serve a certificate of this node's own (<node>.node.probe-agent.faultline.io), requested through the Kubernetes CSR API (from --node-cert-signer, approved by the controller) with a key made here, kept in this directory and renewed before it expires; instead of --tls-cert-file")
	f.StringVar(&certReq.SignerName, "node-cert-signer", agentapi.SignerName, "with --node-cert-dir: the signer the certificate is requested from (spec.signerName); another than "+agentapi.SignerName+" is an external signer the controller only approves for, such as cert-manager's issuers.cert-manager.io/NAMESPACE.ISSUER or clusterissuers.cert-manager.io/ISSUER")
	f.DurationVar(&certReq.Lifetime, "node-cert-lifetime", 0, "with --node-cert-dir: the lifetime asked for (spec.expirationSeconds, at least 10m); 0 leaves it to the signer (cert-manager's default is 90 days)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig for token and access reviews (default $KUBECONFIG, then in-cluster)")
	f.StringSliceVar(&audiences, "token-audience", nil, "accept only bearer tokens for these audiences (the chart: "+agentapi.TokenAudience+"); default the apiserver's")
	f.StringArrayVar(&commands, "command", nil, "path of a probe program, name=path (pciebw, dgemm, dcgmi, iperf3, ping, nvidia-smi); default: the name in $PATH")
	f.StringArrayVar(&timeouts, "timeout", nil, "override a check's timeout, check=duration (repeatable)")
	f.StringVar(&cfg.NVMLLibrary, "nvml-library", "", "path of libnvidia-ml.so.1 (default: the dynamic loader's search path)")
	f.StringVar(&cfg.SysfsRoot, "sysfs-root", "", "where sysfs is mounted (default /sys)")
	lines.add(f)
	f.StringVar(&gpus.Socket, "pod-resources-socket", agent.DefaultPodResourcesSocket, "the kubelet's PodResources socket: which containers hold GPU devices (empty: none can be found, invasive probes need force)")
	f.StringSliceVar(&gpus.Prefixes, "gpu-resource-prefix", agent.DefaultGPUResourcePrefixes, "device-plugin resource names (prefixes) that are GPUs")
	f.StringSliceVar(&gpus.DRADrivers, "gpu-dra-driver", agent.DefaultGPUDRADrivers, "DRA drivers whose devices are GPUs")
	f.StringArrayVar(&peers, "allow-peer", nil, "a peer iperf3 and ping may aim at besides the agent nodes: an IP, a CIDR or a host name (repeatable)")
	f.StringVar(&peerNodes, "peer-node-selector", "", "label selector of the nodes that run the agent; their addresses are allowed peers (empty: every node)")
	f.StringSliceVar(&allow.Hostengines, "allow-hostengine", probe.DefaultHostengines, "nv-hostengines dcgm may use: host (any port) or host:port")
	f.StringSliceVar(&ports, "allow-port", []string{probe.DefaultPorts[0].String()}, "ports iperf3 may listen on and connect to: PORT or FIRST-LAST")
	f.StringSliceVar(&allow.FileDirs, "allow-file-dir", []string{probe.DefaultProbeFileDir}, "directories whose files probe parameters may name (dgemm thresholds)")
	f.IntVar(&runsPerMin, "max-runs-per-minute", agent.DefaultRunsPerMinute, "runs the agent starts per minute (more get 429)")
	f.IntVar(&cfg.MaxIperf3Servers, "max-iperf3-servers", probe.DefaultMaxIperf3Servers, "one-shot iperf3 servers waiting at once (more get 429)")
	f.Float64Var(&reviews, "max-token-reviews-per-second", kubeauth.DefaultReviewsPerSecond, "token reviews per second for tokens not in the cache (more get 429)")
	return cmd
}

// allowPeer adds an --allow-peer value: an address, a CIDR or a host name.
func allowPeer(a *probe.AllowList, v string) error {
	if pf, err := netip.ParsePrefix(v); err == nil {
		a.PeerPrefixes = append(a.PeerPrefixes, pf.Masked())
		return nil
	}
	if addr, err := netip.ParseAddr(v); err == nil {
		a.PeerPrefixes = append(a.PeerPrefixes, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
		return nil
	}
	if err := probe.ValidateHost(v); err != nil {
		return fmt.Errorf("--allow-peer %q: want an IP, a CIDR or a host name: %w", v, err)
	}
	a.PeerHosts = append(a.PeerHosts, v)
	return nil
}

// removeStaleProbingTaint retries until the node carries no probing taint (the
// apiserver may not answer yet when the agent starts).
func removeStaleProbingTaint(ctx context.Context, ag *agent.Agent, log *slog.Logger) {
	// Now, then 10s after each failure, until ctx ends (the only error Until returns).
	_ = wait.Backoff{Duration: 10 * time.Second}.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err := ag.RemoveProbingTaint(ctx)
		if err != nil {
			log.Warn("cannot remove a stale probing taint; retrying", "err", err)
		}
		return err == nil, nil
	})
}

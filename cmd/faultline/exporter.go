package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/podfilter"
	"github.com/faultline-dev/faultline/dmesg-exporter/podlogs"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/internal/daemon"
)

func newExporterCmd() *cobra.Command {
	var (
		cfg        exporter.Config
		otlpURL    string
		lokiURL    string
		tenant     string
		listen     string
		gzipOff    bool
		maxBackoff time.Duration
		podRoot    string
		podCfg     podlogs.Config
		podLabels  string
		kubeconfig string
		auth       ship.Auth
	)
	cmd := &cobra.Command{
		Use: "dmesg-exporter",
		Example: `  faultline dmesg-exporter --otlp-endpoint http://otel-collector:4318 --node gpu-3
  faultline dmesg-exporter --loki-url http://loki:3100 --pod-logs /var/log/pods --pod-label-selector workload=training`,
		Short: "Ship this node's kernel log and training-pod logs to an OpenTelemetry Collector or Loki",
		Long: `Reads /dev/kmsg (and pod log files) and ships every line, with the node's name,
over OTLP/HTTP to a collector (--otlp-endpoint) or straight to Loki (--loki-url).
The read position (boot id and last acknowledged sequence number) is saved in
--state-file only after the receiver acknowledged, so a restart neither replays
nor loses lines; after a reboot the new boot's ring buffer is shipped from its start.
Kernel and pod lines travel in separate lanes bounded in bytes, so pod lines never
hold kernel lines back. A batch the receiver refuses as too large (413) is split,
and a single line cut; any other refusal is retried while /healthz fails.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (otlpURL == "") == (lokiURL == "") {
				return errors.New("set exactly one of --otlp-endpoint and --loki-url")
			}
			if cfg.Node == "" {
				cfg.Node = os.Getenv("NODE_NAME")
			}
			if cfg.Node == "" {
				h, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("node name: %w", err)
				}
				cfg.Node = h
			}
			client, err := auth.Client()
			if err != nil {
				return err
			}
			if otlpURL != "" {
				cfg.Sender = ship.NewOTLP(otlpURL, ship.OTLPOptions{Gzip: !gzipOff, Client: client})
			} else {
				cfg.Sender = ship.NewLoki(lokiURL, ship.LokiOptions{Tenant: tenant, Client: client})
			}
			cfg.Backoff.Max = maxBackoff
			if podRoot != "" {
				podCfg.Root = podRoot
				cfg.PodLogs = &podCfg
			}
			if podLabels != "" {
				client, err := daemon.KubeClient(kubeconfig)
				if err != nil {
					return err
				}
				if podCfg.Allow, err = podfilter.Labels(cmd.Context(), client, cfg.Node, podLabels); err != nil {
					return err
				}
			}
			if os.Getenv("GOGC") == "" {
				// A DaemonSet runs on every node: trade a little CPU for a heap that
				// grows half as much between collections (GOGC overrides).
				debug.SetGCPercent(50)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			cfg.Metrics = exporter.NewMetrics(reg)
			cfg.Log = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)).With("node", cfg.Node)
			ex, err := exporter.New(cfg)
			if err != nil {
				return err
			}
			// /livez (the liveness probe) fails only when a restart can help: the
			// kernel reader died or hangs. /healthz fails also while the receiver
			// refuses records, which a restart cannot fix.
			srv, err := daemon.ServeHTTP(listen, nil, reg, map[string]func() error{"/healthz": ex.Healthy, "/livez": ex.Alive})
			if err != nil {
				return err
			}
			defer srv.Shutdown(context.Background())
			cfg.Log.Info("dmesg-exporter started", "kmsg", cfg.KmsgPath, "sender", cfg.Sender.Name(), "listen", srv.Addr)
			return ex.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Node, "node", "", "node name attached to every line (default $NODE_NAME, then the host name)")
	f.StringVar(&cfg.KmsgPath, "kmsg-path", "/dev/kmsg", "kernel log device, or a file/FIFO in /dev/kmsg's record format")
	f.StringVar(&cfg.BootIDPath, "boot-id-path", "/proc/sys/kernel/random/boot_id", "file holding the current boot id")
	f.StringVar(&cfg.StatePath, "state-file", "/var/lib/faultline/dmesg-exporter.json", "where the read position is saved (a hostPath in the chart)")
	f.BoolVar(&cfg.AllFacilities, "all-facilities", false, "also ship records user space wrote to /dev/kmsg (facility > 0)")
	f.StringVar(&otlpURL, "otlp-endpoint", "", "OTLP/HTTP base URL of a collector, e.g. http://otel-collector:4318")
	f.StringVar(&lokiURL, "loki-url", "", "Loki base URL for direct push, e.g. http://loki:3100")
	f.StringVar(&tenant, "loki-tenant", "", "X-Scope-OrgID for Loki")
	f.StringVar(&auth.TokenFile, "token-file", "", "bearer token sent to the receiver, re-read as it rotates (the chart's projected ServiceAccount token with audience faultline-collector)")
	f.StringVar(&auth.CAFile, "ca-file", "", "PEM CA certificates that verify an https:// receiver (default: the system roots)")
	f.BoolVar(&gzipOff, "no-gzip", false, "do not gzip OTLP requests")
	f.IntVar(&cfg.BatchSize, "batch-size", 500, "most records per batch")
	f.IntVar(&cfg.BatchBytes, "batch-bytes", exporter.DefaultBatchBytes, "most bytes per batch before compression; keep it under the receiver's request limit (a 413 splits the batch)")
	f.DurationVar(&cfg.BatchWait, "batch-wait", time.Second, "longest a record waits for its batch")
	f.IntVar(&cfg.BufferSize, "buffer", 10000, "records buffered per source (kernel, pod) before its reader waits")
	f.IntVar(&cfg.BufferBytes, "buffer-bytes", exporter.DefaultBufferBytes, "bytes read and not yet acknowledged per source before its reader waits (bounds memory)")
	f.DurationVar(&cfg.MaxAge, "max-age", 167*time.Hour, "drop (and count) records older than this when read: Loki refuses them for good beyond reject_old_samples_max_age (168h by default); 0 ships every record")
	f.DurationVar(&maxBackoff, "max-backoff", 30*time.Second, "longest wait between retries")
	f.StringVar(&listen, "listen", ":9400", "address for /metrics and /healthz")
	f.StringVar(&podRoot, "pod-logs", "", "pod log directory to tail (the kubelet's /var/log/pods); empty: kernel log only")
	f.StringArrayVar(&podCfg.IncludeNamespaces, "pod-namespace", nil, "only tail pods in namespaces matching this regex (repeatable)")
	f.StringArrayVar(&podCfg.ExcludeNamespaces, "pod-exclude-namespace", nil, "never tail pods in namespaces matching this regex (repeatable)")
	f.StringVar(&podCfg.PodName, "pod-name", "", "only tail pods whose name matches this regex")
	f.StringVar(&podLabels, "pod-label-selector", "", "only tail pods of this node whose labels match (e.g. workload=training); watches the node's pods")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig for --pod-label-selector (default $KUBECONFIG, then in-cluster)")
	return cmd
}

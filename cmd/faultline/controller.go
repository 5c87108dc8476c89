package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/active-probes/pvc"
	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/internal/daemon"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newControllerCmd() *cobra.Command {
	var (
		cfg        controller.Config
		kubeconfig string
		listen     string
		packs      packFlags
		logFormat  string
		logLevel   slog.Level
		lf         lokiFlags
		df         decideFlags
		ff         fleetFlags
		pf         probeFlags
		sf         signerFlags
		apiQPS     float32
		apiBurst   int
		agentPods  *proberun.AgentPods
		shard      shardFlags
		remedyDir  string
		status     statusFlags
		intake     intakeFlags
	)
	cmd := &cobra.Command{
		Use: "controller",
		Example: `  faultline controller --loki-url http://loki-gateway.loki:80 --dry-run
  faultline controller --loki-url http://loki-gateway.loki:80 --packs /etc/faultline/packs --grafana-url https://grafana.example`,
		Short: "Read logs from Loki, match the rule packs, and taint faulty nodes (leader-elected)",
		Long: `Follows Loki with LogQL built from the rule packs (catch-up from a saved position,
then the tail), matches and correlates the lines, and taints faulty nodes
NoSchedule with the evidence in a NodeFault object and an Event — under a budget, with
storm hold, and with --dry-run to only report. Run two replicas: one leads.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Loki.URL == "" {
				return errors.New("--loki-url is required")
			}
			if err := df.apply(&cfg.Decide); err != nil {
				return err
			}
			if err := ff.apply(&cfg.Decide.Fleet); err != nil {
				return err
			}
			if cfg.ActWorkers < 1 || cfg.ActWorkers > maxActWorkers {
				return fmt.Errorf("--act-workers (%d) must be between 1 and %d", cfg.ActWorkers, maxActWorkers)
			}
			if apiQPS <= 0 || apiBurst < 1 {
				return fmt.Errorf("--kube-api-qps (%g) and --kube-api-burst (%d) must be positive", apiQPS, apiBurst)
			}
			if os.Getenv("GOGC") == "" {
				// The heap is mostly the Node cache, which stays: a heap that grows
				// half as much between collections is 12-15 % less memory charged at
				// 10,000 nodes, for about one percent more of a core (GOGC
				// overrides; docs/scale.md measures both).
				debug.SetGCPercent(50)
			}
			opts := &slog.HandlerOptions{Level: logLevel}
			var h slog.Handler = slog.NewJSONHandler(cmd.ErrOrStderr(), opts)
			if logFormat == "text" {
				h = slog.NewTextHandler(cmd.ErrOrStderr(), opts)
			}
			cfg.Log = slog.New(h).With("identity", cfg.Identity)
			rc, err := daemon.KubeRESTConfig(kubeconfig)
			if err != nil {
				return err
			}
			// A controller over thousands of nodes: client-go's default 5 requests/s
			// would make the API the pipeline's bottleneck, and a burst of faults needs
			// a node write and an Event each, at once.
			rc.QPS, rc.Burst = apiQPS, apiBurst
			typed := builtinTypesConfig(rc)
			client, err := kubernetes.NewForConfig(typed)
			if err != nil {
				return err
			}
			cfg.Client = client
			// The Lease and the Events each get a client with a rate limiter of its
			// own: a burst's thousands of writes must not delay the lease's renewal
			// past --renew-deadline (the leader would step down mid-burst), and its
			// Events, sent after each taint, must not wait in front of the next ones.
			if cfg.Election.Client, err = sideClient(typed, electionQPS, electionBurst); err != nil {
				return err
			}
			if cfg.Act.Events, err = sideClient(typed, rc.QPS, rc.Burst); err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(rc)
			if err != nil {
				return err
			}
			if cfg.Escalation.Remediator, err = act.NewRemediator(dyn, client.Discovery(), remedyDir, cfg.Namespace); err != nil {
				return fmt.Errorf("--remediation-templates: %w", err)
			}
			reg := prometheus.NewRegistry()
			cfg.Probes, agentPods, err = pf.config(rc, client, cfg.Namespace)
			if err != nil {
				return err
			}
			// Every replica signs: the CSR API's resourceVersions keep two from
			// writing one request twice.
			if err := sf.start(cmd.Context(), client, pf.agentNamespace(cfg.Namespace), cfg.Log); err != nil {
				return err
			}
			if agentPods != nil {
				agentPods.Start(cmd.Context())
			} else if cfg.Probes.AgentURLs == nil {
				cfg.Log.Info("probes off: no in-cluster agents (they need --probe-agent-ca-file and --probe-agent-port: TLS only) and no --probe-agent URLs")
			}
			if pf.pvc {
				// One registry: the node checks and those the controller runs itself.
				cfg.Probes.Registry = probe.Default().With(pvc.Spec(client, cfg.Namespace))
				cfg.Probes.Local = probe.NewRunner(cfg.Probes.Registry, probe.Config{}, probe.NewMetrics(reg))
			}
			packs.watch(&cfg.Packs)
			cfg.Selectors = lf.selectors()
			if err := shard.apply(&cfg); err != nil {
				return err
			}
			cfg.Act.Instance = cfg.Identity
			if cfg.Act.Eligible, err = pf.eligible(); err != nil {
				return err
			}
			lf.apply(&cfg.Loki)
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			cfg.Metrics = controller.NewMetrics(reg)
			if cfg.WhileLeading, err = intake.whileLeading(client, cfg.Namespace, cfg.Log); err != nil {
				return err
			}
			c, err := controller.New(cfg)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
			mux.Handle("/", c.Handler())
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen %s: %w", listen, err)
			}
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go srv.Serve(ln)
			defer srv.Shutdown(context.Background())
			stopStatus, err := status.serve(rc, client, c, reg, cfg.Log)
			if err != nil {
				return err
			}
			defer stopStatus()
			// Pushed lines are read as the selectors' names say (a line's source).
			stopIntake, err := intake.serve(client, c, cfg.Loki.NodeLabel, slices.Collect(maps.Keys(cfg.Selectors)), reg, cfg.Log)
			if err != nil {
				return err
			}
			defer stopIntake()
			cfg.Log.Info("controller started", "listen", ln.Addr().String(), "loki", redactURL(cfg.Loki.URL), "dry_run", cfg.Decide.DryRun, "max_mode", cfg.Decide.MaxMode)
			return c.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then in-cluster)")
	f.StringVar(&cfg.Namespace, "namespace", envOr("POD_NAMESPACE", "faultline"), "namespace of the Lease and the checkpoint ConfigMap")
	f.StringVar(&cfg.Identity, "identity", envOr("POD_NAME", hostname()), "this replica's identity in the election")
	f.StringVar(&cfg.PodName, "pod-name", os.Getenv("POD_NAME"), "this replica's pod, for Events about the controller itself")
	packs.register(f, "rule pack directory or file, loaded after the built-in packs and reloaded on change (repeatable)", "do not load the built-in packs")
	f.DurationVar(&cfg.Packs.Interval, "packs-interval", 5*time.Second, "how often pack files are checked for changes")
	lf.register(f, &cfg.Loki)
	f.DurationVar(&cfg.Loki.Overlap, "loki-overlap", 30*time.Second, "how far back a query re-reads after a reconnect or restart, for lines that reach Loki late (raise it when node clocks lag)")
	f.DurationVar(&cfg.Loki.CreationGracePeriod, "loki-creation-grace-period", 10*time.Minute, "Loki's creation_grace_period: reads reach this far into the future, for nodes whose clock leads")
	f.DurationVar(&cfg.Loki.ClockTolerance, "loki-clock-tolerance", time.Minute, "a tailed line older than this is dated when it arrived; no line is dated after the controller's clock")
	f.BoolVar(&cfg.Decide.DryRun, "dry-run", false, "decide and report (Events, metrics, logs) but change no Node")
	f.BoolVar(&cfg.Act.Condition, "node-condition", false, "also set the FaultlineFault node condition")
	f.BoolVar(&cfg.AffectedPods, "affected-pods", true, "list in each fault's NodeFault the pods that held the node's GPUs when it was recorded, with their owners, and post a Warning Event on each (watches the cluster's bound, unfinished pods, keeping the GPU pods)")
	f.StringVar(&remedyDir, "remediation-templates", "", "directory of remediation templates (NAME.yaml: one object with {{.Node}}-style placeholders) for the escalation step remediate")
	f.DurationVar(&cfg.Escalation.DrainTimeout, "drain-timeout", act.DefaultDrainTimeout, "how long one attempt of an escalation's drain may take; a drain a PodDisruptionBudget blocks, or whose evicted pods are still shutting down, waits and is tried again")
	df.register(f, &cfg.Decide)
	ff.register(f, &cfg.Decide.Fleet)
	f.DurationVar(&cfg.InitialLookback, "initial-lookback", 10*time.Minute, "with no saved position, start this far back")
	f.Float32Var(&apiQPS, "kube-api-qps", 500, "requests per second to the Kubernetes API, sustained (spent only while faults are carried out: a new fault's taint is three requests, a hold two; Events have a client of their own with the same limits)")
	f.IntVar(&apiBurst, "kube-api-burst", 2000, "requests to the Kubernetes API allowed at once above --kube-api-qps (a 1,000-node burst of faults is about 2,750 requests, and 1,000 Events)")
	f.IntVar(&cfg.ActWorkers, "act-workers", controller.DefaultActWorkers, "decisions carried out at once (taint writes, Events, records), each node's one at a time and in order; decided one at a time whatever this is")
	f.DurationVar(&cfg.ReconcileEvery, "reconcile-interval", 10*time.Second, "how often recoveries and held faults are checked")
	f.DurationVar(&cfg.Records.Retention, "nodefault-retention", 7*24*time.Hour, "how long a Resolved NodeFault is kept before it is deleted")
	f.DurationVar(&cfg.ProbeRunRetention, "probe-run-retention", 24*time.Hour, "how long a finished ProbeRun is kept before it is deleted")
	f.StringVar(&cfg.Records.GrafanaURL, "grafana-url", "", "Grafana base URL: each NodeFault links to its lines in Explore")
	f.StringVar(&cfg.Records.Datasource, "grafana-datasource", "loki", "uid of the Loki datasource in Grafana, for the NodeFault links")
	f.DurationVar(&cfg.Election.LeaseDuration, "lease-duration", 15*time.Second, "leader lease duration")
	f.DurationVar(&cfg.Election.RenewDeadline, "renew-deadline", 10*time.Second, "leader renew deadline")
	f.DurationVar(&cfg.Election.RetryPeriod, "retry-period", 2*time.Second, "leader election retry period")
	f.StringVar(&listen, "listen", ":9401", "address of the plain-HTTP port: /metrics, /healthz and /readyz, nothing that takes a token")
	f.StringVar(&logFormat, "log-format", "json", "json or text")
	f.TextVar(&logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
	pf.register(f)
	sf.register(f)
	status.register(f)
	intake.register(f)
	shard.register(f)
	return cmd
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// redactURL hides a password in a URL's user info before it is logged; a URL that
// does not parse is not logged at all.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// maxActWorkers bounds --act-workers: past the client's rate limit more workers
// only wait.
const maxActWorkers = 1024

// The Lease's client: a renewal every --retry-period, a few requests each.
const electionQPS, electionBurst = 5, 10

// builtinTypesConfig is rc speaking protobuf, for the clients of Kubernetes' own
// types (Nodes, Pods, Events, Leases): at thousands of Nodes the apiserver and the
// controller spend several times less CPU and memory encoding and decoding them
// than JSON, as kube-controller-manager does. Custom resources (NodeFault,
// ProbeRun) have no protobuf form: their clients keep rc's JSON.
func builtinTypesConfig(rc *rest.Config) *rest.Config {
	c := rest.CopyConfig(rc)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// sideClient is a client on rc's connection settings with a rate limiter of its own.
func sideClient(rc *rest.Config, qps float32, burst int) (kubernetes.Interface, error) {
	c := rest.CopyConfig(rc)
	c.QPS, c.Burst, c.RateLimiter = qps, burst, nil
	return kubernetes.NewForConfig(c)
}

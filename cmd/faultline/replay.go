package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/replay"
	"github.com/faultline-dev/faultline/internal/daemon"
	"github.com/faultline-dev/faultline/rules"
)

// maxReplay bounds --since/--until: Loki keeps a month by default, and a replay of
// more holds more of the fleet's history in its correlation state than is sensible.
const maxReplay = 90 * 24 * time.Hour

func newReplayCmd() *cobra.Command {
	var (
		cfg          replay.Config
		lf           lokiFlags
		df           decideFlags
		ff           fleetFlags
		sf           shardFlags
		kubeconfig   string
		candidate    packFlags
		baseline     []string
		since        time.Duration
		until        string
		format       string
		output       outputFormat
		nodeSelector string
		fromCluster  string
	)
	cmd := &cobra.Command{
		Use: "replay (--packs DIR [--baseline DIR] | --from-cluster[=NAMESPACE/DEPLOYMENT] [--packs DIR]) [--since 720h] [--until TIME] [--format table|json]",
		Example: `  faultline replay --packs ./site-packs --loki-url http://loki-gateway.loki:80
  faultline replay --packs ./new --baseline ./old --since 168h --loki-url http://loki-gateway.loki:80 --format json
  faultline replay --from-cluster --loki-url http://127.0.0.1:3100
  faultline replay --from-cluster=faultline/faultline-controller-rack-a --packs ./new --budget-percent 20`,
		Short: "What-if: run candidate rule packs and the current ones over Loki's history and diff what each would have done",
		Long: `Reads the lines of the last --since (up to --until) from Loki with the controller's
own queries and catch-up reads, and runs them through the controller's match,
correlate and decide stages — budgets and storm hold included — once with the
candidate packs and once with the baseline packs. Prints which nodes each set
would have tainted, held, probed or posted an Event for, when, by which rule,
and the difference.

Like the controller, each set is the built-in packs (unless --no-default-packs)
followed by its directories: the candidate set takes --packs, the baseline set
--baseline (none: the built-in packs alone, what a controller without --packs
runs).

--from-cluster replays what the running controller would have done: it reads
the controller's Deployment (default faultline/faultline-controller, the chart's;
a sharded controller has one per shard, faultline-controller-NAME: name it) and
parses its container's args with the controller's own flags. Replay takes each
flag it shares (Loki, budgets, storm hold, --max-mode, fleet, shard,
--probe-node-selector; not the controller's files) unless the command line gives
it: flags given here override the Deployment's. The baseline is the controller's
packs — the built-in ones unless its --no-default-packs, then its --packs, each
read from the ConfigMap, Secret or projected volume mounted at or above it — and
the candidate is the same followed by --packs given here (none: the controller's
packs alone, replayed once). --baseline is refused with it. The controller's
--loki-url is an in-cluster address: it is used unless --loki-url is given. The
configuration used (the Deployment, its generation and image, each flag taken,
overridden or not taken, the ConfigMaps with their resourceVersion) is printed to
standard error with the table, and is the JSON's "config". It needs get on the
Deployment and on the ConfigMaps (or Secrets) of its packs.

The decisions rest on the live fleet, read once from the API server (get and list
on Nodes only; nothing is written): the nodes matching --probe-node-selector and
not opted out are the budget's and the storm hold's population; with --shard-label
(a shard's controller), the shard's nodes only, and the lines of other nodes are
skipped. Taints are the
replay's own: a node starts untainted, and a taint is lifted when its rule's
recovery policy allows (a quiet time, or a new boot id in the node's lines).
Probes are not run: a probe decision is reported as "probe".

A rule's escalation ladder climbs as in the controller, on the replayed firings:
repeat and reboot triggers come from the lines (boot ids), a taintedFor step is
reached when the taint has not been lifted by the rule's recovery policy (marked
"assumed": an operator's untaint is not in the logs), and a probeFailed step is
reported as "needs-probe", where the climb stops. Fleet correlation (--fleet-*
flags, as the controller's) groups the nodes by the live fleet's topology
labels; a fleet fault raised holds its members' taints of the pack to the end of
the stretch.

--format table (default) prints a summary per set, the fleet faults of either
set, and every (node, rule, outcome, ladder step) with the set it comes from:
candidate, baseline or both; a progress bar goes to standard error when it is a
terminal. --format json prints one document: {config (with --from-cluster),
since, until, fleet, candidate, baseline, diff, fleets}.

Exit status: 0 when the replay ran, 1 on an error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.Flags().Changed("from-cluster") && fromCluster == defaultControllerRef {
				return fmt.Errorf("--from-cluster takes its Deployment after an equals sign: --from-cluster=%s", args[0])
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format must be table or json, not %q", format)
			}
			if fromCluster == "" && len(candidate.paths) == 0 {
				return errors.New("--packs is required: the candidate rule packs (or --from-cluster)")
			}
			if fromCluster != "" && cmd.Flags().Changed("baseline") {
				return errors.New("--baseline and --from-cluster: with --from-cluster the baseline is the controller's packs")
			}
			end := time.Now()
			if until != "" {
				t, err := time.Parse(time.RFC3339, until)
				if err != nil {
					return fmt.Errorf("--until: want an RFC 3339 time: %w", err)
				}
				end = t
			}
			if since <= 0 || since > maxReplay {
				return fmt.Errorf("--since must be between 1s and %s, not %s", maxReplay, since)
			}
			if cfg.Range.Step <= 0 || cfg.Range.MaxLines <= 0 {
				return fmt.Errorf("--step (%s) and --max-step-lines (%d) must be positive", cfg.Range.Step, cfg.Range.MaxLines)
			}
			cfg.Range.From, cfg.Range.To = end.Add(-since), end
			// The API server is asked only once the command line is known to be good.
			var client kubernetes.Interface
			kube := func() (kubernetes.Interface, error) {
				if client != nil {
					return client, nil
				}
				rc, err := daemon.KubeRESTConfig(kubeconfig)
				if err != nil {
					return nil, err
				}
				cs, err := kubernetes.NewForConfig(rc)
				client = cs
				return cs, err
			}
			ctx := cmd.Context()
			candSet, baseSet := candidate.layers(), candidate.layersOf(!candidate.noDefaults, baseline)
			candName, baseName := candSet.String(), baseSet.String()
			var cc *clusterConfig
			if fromCluster != "" {
				ns, name, err := parseControllerRef(fromCluster)
				if err != nil {
					return err
				}
				kc, err := kube()
				if err != nil {
					return err
				}
				dir, err := os.MkdirTemp("", "faultline-replay-packs-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if cc, err = readController(ctx, controllerDeployment{client: kc, ns: ns, name: name}, cmd.Flags(), dir); err != nil {
					return err
				}
				// The flags taken may have changed --no-default-packs.
				// And the Deployment's taint allowance is taken with its flags.
				baseSet = candidate.layersOf(!candidate.noDefaults, cc.paths())
				candSet = candidate.layersOf(baseSet.defaults, append(cc.paths(), candidate.paths...))
				baseName = packLayers{defaults: baseSet.defaults, paths: cc.podPaths()}.String()
				candName = packLayers{defaults: baseSet.defaults, paths: append(cc.podPaths(), candidate.paths...)}.String()
			}
			if cfg.Loki.URL == "" {
				return errors.New("--loki-url is required")
			}
			sel, err := labels.Parse(nodeSelector)
			if err != nil {
				return fmt.Errorf("--probe-node-selector: %w", err)
			}
			shard, _, err := sf.selector()
			if err != nil {
				return err
			}
			cand, err := candSet.load(forRunning)
			if err != nil {
				return fmt.Errorf("candidate packs: %w", err)
			}
			base := cand
			if fromCluster == "" || len(candidate.paths) > 0 {
				if base, err = baseSet.load(forRunning); err != nil {
					return fmt.Errorf("baseline packs: %w", err)
				}
			}
			lf.apply(&cfg.Loki)
			if err := df.apply(&cfg.Decide); err != nil {
				return err
			}
			if err := ff.apply(&cfg.Decide.Fleet); err != nil {
				return err
			}
			if cfg.Selectors, err = sf.streams(lf.selectors()); err != nil {
				return err
			}
			cfg.Loki.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			kc, err := kube()
			if err != nil {
				return err
			}
			if cfg.Fleet, err = replay.LoadFleet(ctx, kc, shard, sel, cfg.Decide.Fleet.Labels); err != nil {
				return err
			}
			if cmd.Flags().Changed("format") {
				_ = output.Set(format) // table or json, checked above
			}
			if cc != nil && output == outputText {
				if err := cc.writeText(cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			bar := newProgress(cmd.ErrOrStderr(), cfg.Range.From, cfg.Range.To)
			sets := []struct {
				name, packs string
				eng         *rules.Engine
				out         *replay.Set
			}{
				{"candidate", candName, cand.Engine, &replay.Set{}},
				{"baseline", baseName, base.Engine, &replay.Set{}},
			}
			for i, s := range sets {
				if i > 0 && s.eng == sets[0].eng {
					// --from-cluster without --packs: one set, replayed once.
					*s.out = replay.Set{Packs: s.packs, Result: sets[0].out.Result}
					continue
				}
				c := cfg
				c.Range.Progress = bar.step(s.name)
				res, err := replay.Run(ctx, c, s.eng)
				bar.done()
				if err != nil {
					return fmt.Errorf("%s packs: %w", s.name, err)
				}
				*s.out = replay.Set{Packs: s.packs, Result: res}
			}
			rep := replayOutput{Config: cc, Report: replay.NewReport(cfg.Range.From, cfg.Range.To, cfg.Fleet, *sets[0].out, *sets[1].out)}
			if output == outputJSON {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			return output.print(cmd.OutOrStdout(), rep, rep.WriteTable)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then in-cluster); needs get and list on Nodes (and with --from-cluster get on the controller's Deployment and its packs' ConfigMaps)")
	f.StringVar(&fromCluster, "from-cluster", "", "replay with the configuration of the controller Deployment NAMESPACE/DEPLOYMENT (alone: "+defaultControllerRef+"): its flags, unless given here, and its packs as the baseline")
	f.Lookup("from-cluster").NoOptDefVal = defaultControllerRef
	candidate.register(f, "candidate rule pack directory or file (repeatable), loaded after the built-in packs (with --from-cluster: after the controller's packs)", "load the built-in packs in neither set")
	f.StringArrayVar(&baseline, "baseline", nil, "baseline rule pack directory or file (repeatable), loaded after the built-in packs; default: the built-in packs alone")
	f.DurationVar(&since, "since", 720*time.Hour, "replay this far back from --until")
	f.StringVar(&until, "until", "", "end of the replay, RFC 3339 (default: now)")
	f.StringVar(&format, "format", "table", "output format: table or json (the older spelling of -o)")
	addOutputFlag(f, &output)
	f.StringVar(&nodeSelector, "probe-node-selector", "nvidia.com/gpu.present=true", "the GPU nodes (label selector): the population of --budget-percent and --storm-share, as the controller's flag")
	f.DurationVar(&cfg.Range.Step, "step", time.Hour, "stretch of history read from every query before its lines are merged by time")
	f.IntVar(&cfg.Range.MaxLines, "max-step-lines", 1_000_000, "most lines one --step may hold in memory; more is an error (use a shorter --step)")
	lf.register(f, &cfg.Loki)
	df.register(f, &cfg.Decide)
	ff.register(f, &cfg.Decide.Fleet)
	sf.register(f)
	return cmd
}

// replayOutput is the report and, with --from-cluster, the configuration it used.
type replayOutput struct {
	Config *clusterConfig `json:"config,omitempty"`
	replay.Report
}

// progress draws one line on a terminal: which set, how far through the stretch.
// It draws nothing when w is not a terminal.
type progress struct {
	w        io.Writer
	on       bool
	from, to time.Time
}

func newProgress(w io.Writer, from, to time.Time) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, on: ok && term.IsTerminal(int(f.Fd())), from: from, to: to}
}

const barWidth = 40

func (p *progress) step(name string) func(time.Time) {
	if !p.on {
		return nil
	}
	return func(done time.Time) {
		frac := float64(done.Sub(p.from)) / float64(p.to.Sub(p.from))
		frac = min(max(frac, 0), 1)
		n := int(frac * barWidth)
		fmt.Fprintf(p.w, "\r%-9s [%s%s] %3.0f%% %s", name, strings.Repeat("=", n), strings.Repeat(" ", barWidth-n),
			frac*100, done.UTC().Format("2006-01-02 15:04"))
	}
}

func (p *progress) done() {
	if p.on {
		fmt.Fprintln(p.w)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/active-probes/nvmlevents"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/internal/cli"
)

// newCheckCmd runs checks once on this machine, without the API and without
// Kubernetes: by hand over kubectl exec, on a bench before a node joins the cluster,
// or on a host that runs no agent. The checks are the agent's own, with the same
// parameters, defaults, timeouts and verdicts.
func newCheckCmd() *cobra.Command {
	var (
		cfg      probe.Config
		commands []string
		params   []string
		force    bool
		format   string
	)
	cmd := &cobra.Command{
		Use:   "check [CHECK...]",
		Short: "Run checks on this machine once and print their results (no API, no Kubernetes)",
		Long: `Runs the named checks here (without a name, the routine ones: those enabled by
default), one after another, as the agent would run them for the controller, and
prints each result. Invasive checks (pciebw, dgemm, the deeper
dcgm levels, ...) load the GPUs or the network: they run only with --force, which
says that nothing else uses this machine's GPUs now (the command cannot ask the
kubelet, and an agent running on the same node does not know of these runs).

Exit status: 0 when every check passed, warned or was skipped; 2 when one failed
or could not run (error); 1 when the command itself is wrong.`,
		Example: `  faultline-probe-agent check nvml
  faultline-probe-agent check nvml pciebw dgemm --force --command pciebw=/opt/faultline/pciebw --command dgemm=/opt/faultline/dgemm
  faultline-probe-agent check dgemm --force --param dgemm.gpus=0,1 --format json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format must be text or json, not %q", format)
			}
			var err error
			if cfg.Commands, err = commandPaths(commands); err != nil {
				return err
			}
			runner := probe.NewRunner(nil, cfg, nil)
			defer runner.Close()
			if len(args) == 0 {
				args = runner.Registry().DefaultEnabled()
			}
			perCheck, err := checkParams(params, args)
			if err != nil {
				return err
			}
			for _, name := range args {
				spec, ok := runner.Registry().Get(name)
				if !ok || spec.New == nil {
					return fmt.Errorf("unknown check %q: this program runs %s", name, strings.Join(implemented(runner.Registry()), ", "))
				}
				resolved, err := spec.Params.Resolve(perCheck[name])
				if err != nil {
					return fmt.Errorf("check %s: %w", name, err)
				}
				if spec.IsInvasive(resolved) && !force {
					return fmt.Errorf("check %s is invasive (it loads this machine's GPUs or network): run it with --force on an idle machine", name)
				}
			}
			worst := probe.StatusPass
			out := cmd.OutOrStdout()
			for _, name := range args {
				res, err := runner.Run(cmd.Context(), name, perCheck[name])
				if err != nil {
					return err
				}
				worst = probe.Worst(worst, res.Status)
				if format == "json" {
					err = json.NewEncoder(out).Encode(res)
				} else {
					err = printResult(out, res)
				}
				if err != nil {
					return err
				}
			}
			if worst == probe.StatusFail || worst == probe.StatusError {
				return cli.ExitError{Code: 2}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&commands, "command", nil, "path of a probe program, name=path (pciebw, dgemm, dcgmi, iperf3, ping, nvidia-smi); default: the name in $PATH")
	f.StringArrayVar(&params, "param", nil, "a check's parameter, check.name=value (repeatable), e.g. pciebw.size_mb=512")
	f.StringVar(&cfg.NVMLLibrary, "nvml-library", "", "path of libnvidia-ml.so.1 (default: the dynamic loader's search path)")
	f.StringVar(&cfg.SysfsRoot, "sysfs-root", "", "where sysfs is mounted (default /sys)")
	f.StringVar(&cfg.Node, "node", "", "node name written into the results (default: none)")
	f.BoolVar(&force, "force", false, "run invasive checks: nothing else uses this machine's GPUs or network now")
	f.StringVar(&format, "format", "text", "output: text, or json (one result object per line, as the API returns it)")
	return cmd
}

// commandPaths parses --command name=path flags.
func commandPaths(flags []string) (map[string]string, error) {
	m := map[string]string{}
	for _, c := range flags {
		name, path, ok := strings.Cut(c, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--command %q: want name=path", c)
		}
		m[name] = path
	}
	return m, nil
}

// checkParams parses the --param flags; each must name a check being run.
func checkParams(flags, checks []string) (map[string]probe.Params, error) {
	m, err := probe.ParseCheckParams(flags)
	if err != nil {
		return nil, err
	}
	for check := range m {
		if !slices.Contains(checks, check) {
			return nil, fmt.Errorf("--param %s.*: check %s is not run", check, check)
		}
	}
	return m, nil
}

// implemented lists the checks this program runs.
func implemented(reg *probe.Registry) []string {
	var names []string
	for _, s := range reg.List() {
		if s.New != nil {
			names = append(names, s.Name)
		}
	}
	return names
}

// printResult writes one result for a person: the verdict, then each device with
// its verdict and, indented below it, its measurements.
func printResult(w io.Writer, r probe.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s in %s", r.Check, r.Status, r.Duration.Round(time.Millisecond))
	if r.Message != "" {
		fmt.Fprintf(&b, ": %s", r.Message)
	}
	b.WriteByte('\n')
	for _, d := range r.Devices {
		b.WriteString("  " + strings.Join(nonEmpty(d.ID, d.PCI, d.Name), " ") + ": " + string(d.Status))
		if d.Message != "" {
			b.WriteString(" (" + d.Message + ")")
		}
		b.WriteByte('\n')
		if len(d.Values) > 0 {
			b.WriteString("    " + values(d.Values) + "\n")
		}
	}
	if len(r.Values) > 0 {
		b.WriteString("  node: " + values(r.Values) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func nonEmpty(ss ...string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// values formats measurements as name=value, sorted by name.
func values(m map[string]float64) string {
	var b strings.Builder
	probe.WriteValues(&b, "", m)
	return strings.TrimPrefix(b.String(), " ")
}

// newEventsCmd watches the GPUs' NVML events for a while and prints each as the
// line the agent ships with --nvml-events: what a node would report, without a
// receiver. Registrations NVML refuses are logged on stderr.
func newEventsCmd() *cobra.Command {
	var (
		library    string
		period     time.Duration
		clockEvery time.Duration
	)
	cmd := &cobra.Command{
		Use:   "nvml-events",
		Short: "Print this machine's NVML events (Xid, ECC, clock, power source) as the agent's lines, for a while",
		Long: `Registers the event types the agent watches on every GPU, prints each event as a
JSON object {"time","level","text"} with the text the agent ships (source="nvml";
every clock change, unless --clock-interval coalesces them as the agent does),
and stops after --for (0: until interrupted). Event types a GPU does not support are
logged on stderr. Exit status 1 when NVML cannot be used or no GPU supports a
watched type.`,
		Example: `  faultline-probe-agent nvml-events --for 30s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if period > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, period)
				defer cancel()
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			w, err := nvmlevents.Open(library, nvmlevents.Config{
				ClockInterval: clockEvery,
				Log:           slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)),
				Ship: func(ctx context.Context, l nvmlevents.Line) bool {
					if err := enc.Encode(struct {
						Time  time.Time `json:"time"`
						Level int       `json:"level"`
						Text  string    `json:"text"`
					}{l.Time, l.Level, l.Text}); err != nil {
						return false
					}
					return ctx.Err() == nil
				},
			})
			if err != nil {
				return err
			}
			if err := w.Run(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&library, "nvml-library", "", "path of libnvidia-ml.so.1 (default: the dynamic loader's search path)")
	cmd.Flags().DurationVar(&period, "for", 0, "stop after this long (0: until interrupted)")
	cmd.Flags().DurationVar(&clockEvery, "clock-interval", time.Nanosecond, "least time between two clock-change lines of a GPU (the agent's --nvml-clock-interval; default: print every change)")
	return cmd
}

package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/internal/cli"
	"github.com/faultline-dev/faultline/internal/daemon"
)

func newProbeCmd() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Run active probes (ProbeRun objects) and read their results",
		Long: `Run active probes and read their results. A run is a ProbeRun object
(faultline.io/v1alpha1): this command creates it with the kubeconfig's credentials,
the leading controller runs it and writes its results into its status. RBAC on
proberuns decides who may (ClusterRoles faultline-viewer: get, list, watch;
faultline-operator: create too, and proberuns/force for --force).`,
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, then in-cluster)")
	client := func() (rest.Interface, error) { return probeRunClient(kubeconfig) }

	var (
		nodes, checks []string
		selector      string
		params        []string
		force, wait   bool
		batch         int32
		timeout       time.Duration
		output        outputFormat
	)
	run := &cobra.Command{
		Use:   "run",
		Short: "Run checks on nodes (--node or --selector); --wait prints progress and a result table",
		Example: `  faultline probe run --node gpu-3 --check pciebw,dgemm --wait
  faultline probe run --selector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --check nvml --wait
  faultline probe run --node gpu-1 --check dcgm --param dcgm.level=3 --force --wait`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pr := &v1alpha1.ProbeRun{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
				Spec: v1alpha1.ProbeRunSpec{Nodes: nodes, Checks: checks, Force: force, Batch: batch}}
			if selector != "" {
				sel, err := metav1.ParseToLabelSelector(selector)
				if err != nil {
					return fmt.Errorf("--selector: %w", err)
				}
				pr.Spec.NodeSelector = sel
			}
			perCheck, err := probe.ParseCheckParams(params)
			if err != nil {
				return err
			}
			for check, p := range perCheck {
				if pr.Spec.Params == nil {
					pr.Spec.Params = map[string]map[string]string{}
				}
				pr.Spec.Params[check] = p
			}
			rc, err := client()
			if err != nil {
				return err
			}
			created := &v1alpha1.ProbeRun{}
			if err := rc.Post().Resource(v1alpha1.ProbeRunResource).Body(pr).Do(cmd.Context()).Into(created); err != nil {
				return fmt.Errorf("create ProbeRun: %w", err)
			}
			out := cmd.OutOrStdout()
			if !wait {
				return output.print(out, typed(created), func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "proberun %s created: %s\nfollow it with: faultline probe get %s --wait (or kubectl get proberun %s)\n",
						created.Name, strings.Join(checks, ","), created.Name, created.Name)
					return err
				})
			}
			return waitRun(cmd.Context(), rc, created, timeout, output, out, cmd.ErrOrStderr())
		},
	}
	f := run.Flags()
	f.StringSliceVar(&nodes, "node", nil, "node(s) to probe (repeatable or comma-separated)")
	f.StringVar(&selector, "selector", "", "probe the nodes matching this label selector")
	f.StringSliceVar(&checks, "check", nil, "checks to run: nvml, pciebw, dgemm, dcgm, iperf3, ping, pvc (comma-separated)")
	f.StringArrayVar(&params, "param", nil, "a check's parameter, check.name=value (repeatable), e.g. pciebw.floor_gbps=8")
	f.BoolVar(&force, "force", false, "run invasive checks even while pods hold the node's GPUs (needs create on proberuns/force)")
	f.BoolVar(&wait, "wait", false, "wait for the results, showing progress")
	f.Int32Var(&batch, "batch", 0, "nodes probed at once (default: the controller's)")
	f.DurationVar(&timeout, "timeout", time.Hour, "give up waiting after this long")
	addOutputFlag(f, &output)
	_ = run.MarkFlagRequired("check")

	var getWait bool
	get := &cobra.Command{
		Use: "get NAME",
		Example: `  faultline probe get probe-x7k2q
  faultline probe get probe-x7k2q --wait -o yaml`,
		Short: "Show a run (--wait to follow it to the end)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rc, err := client()
			if err != nil {
				return err
			}
			pr := &v1alpha1.ProbeRun{}
			if err := rc.Get().Resource(v1alpha1.ProbeRunResource).Name(args[0]).Do(cmd.Context()).Into(pr); err != nil {
				return fmt.Errorf("ProbeRun %s: %w", args[0], err)
			}
			if getWait {
				return waitRun(cmd.Context(), rc, pr, timeout, output, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if err := output.print(cmd.OutOrStdout(), pr, runPrinter(pr)); err != nil {
				return err
			}
			return runExit(pr)
		},
	}
	get.Flags().BoolVar(&getWait, "wait", false, "wait until the run is done")
	addOutputFlag(get.Flags(), &output)
	get.Flags().DurationVar(&timeout, "timeout", time.Hour, "give up waiting after this long")

	var listOutput outputFormat
	list := &cobra.Command{
		Use: "list",
		Example: `  faultline probe list
  faultline probe list -o json | jq '.[] | select(.status.verdict == "fail") | .metadata.name'`,
		Short: "List the runs (ProbeRuns: by hand, and the controller's records of rules, recoveries, schedules), newest first",
		RunE: func(cmd *cobra.Command, args []string) error {
			rc, err := client()
			if err != nil {
				return err
			}
			var l v1alpha1.ProbeRunList
			if err := rc.Get().Resource(v1alpha1.ProbeRunResource).Do(cmd.Context()).Into(&l); err != nil {
				return fmt.Errorf("list ProbeRuns: %w", err)
			}
			runs := l.Items
			sort.SliceStable(runs, func(i, j int) bool {
				return runs[j].CreationTimestamp.Before(&runs[i].CreationTimestamp)
			})
			return listOutput.print(cmd.OutOrStdout(), runs, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tTRIGGER\tCHECKS\tNODES\tPHASE\tVERDICT\tPASSED\tFAILED\tCREATED")
				for _, r := range runs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Spec.Trigger, strings.Join(r.Spec.Checks, ","), r.Status.NodeCount,
						r.Status.Phase, r.Status.Verdict, r.Status.Passed, r.Status.Failed, r.CreationTimestamp.Local().Format(time.DateTime))
				}
				return tw.Flush()
			})
		},
	}
	addOutputFlag(list.Flags(), &listOutput)
	cmd.AddCommand(run, get, list)
	return cmd
}

// probeRunClient is a client of faultline.io/v1alpha1 with the kubeconfig's
// credentials: the API server authenticates, authorizes and audits each run.
func probeRunClient(kubeconfig string) (rest.Interface, error) {
	rc, err := daemon.KubeRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return v1alpha1.NewRESTClient(cs)
}

// waitRun watches a run until it finished, printing progress to errw, then the table.
func waitRun(ctx context.Context, rc rest.Interface, pr *v1alpha1.ProbeRun, timeout time.Duration, output outputFormat, out, errw io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := ""
	progress := func() {
		done := 0
		for _, n := range pr.Status.Nodes {
			if n.Done {
				done++
			}
		}
		phase := pr.Status.Phase
		if phase == "" {
			phase = v1alpha1.ProbeRunPending
		}
		line := fmt.Sprintf("proberun %s %s: %d/%d node(s) done, %s elapsed", pr.Name, phase, done, len(pr.Status.Nodes), time.Since(start).Round(time.Second))
		if line != last {
			fmt.Fprintln(errw, line)
			last = line
		}
	}
	for !pr.Status.Finished() {
		progress()
		w, err := rc.Get().Resource(v1alpha1.ProbeRunResource).Param("watch", "true").
			Param("fieldSelector", "metadata.name="+pr.Name).Param("resourceVersion", pr.ResourceVersion).Watch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("proberun %s not done after %s: %w", pr.Name, timeout, ctx.Err())
			}
			return fmt.Errorf("watch ProbeRun %s: %w", pr.Name, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return fmt.Errorf("proberun %s was deleted", pr.Name)
			}
			if got, ok := ev.Object.(*v1alpha1.ProbeRun); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				pr = got
				if pr.Status.Finished() {
					break
				}
				progress()
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("proberun %s not done after %s: %w", pr.Name, timeout, ctx.Err())
		}
		if !pr.Status.Finished() { // the watch ended (expired): read it again and watch on
			fresh := &v1alpha1.ProbeRun{}
			if err := rc.Get().Resource(v1alpha1.ProbeRunResource).Name(pr.Name).Do(ctx).Into(fresh); err != nil {
				return fmt.Errorf("ProbeRun %s: %w", pr.Name, err)
			}
			pr = fresh
		}
	}
	if err := output.print(out, pr, runPrinter(pr)); err != nil {
		return err
	}
	return runExit(pr)
}

// runExit: 0 when nothing failed, 2 when a check failed or could not run; an error
// saying why when the controller refused the run.
func runExit(pr *v1alpha1.ProbeRun) error {
	switch pr.Status.Phase {
	case v1alpha1.ProbeRunRefused:
		msg := "refused"
		if c := findCondition(pr.Status.Conditions, v1alpha1.ProbeRunAccepted); c != nil {
			msg = c.Reason + ": " + c.Message
		}
		return fmt.Errorf("proberun %s: %s", pr.Name, msg)
	case v1alpha1.ProbeRunCompleted:
		if pr.Status.Verdict == "fail" || pr.Status.Verdict == "error" {
			return cli.ExitError{Code: 2}
		}
	}
	return nil
}

// typed sets a ProbeRun's apiVersion and kind.
func typed(pr *v1alpha1.ProbeRun) *v1alpha1.ProbeRun {
	pr.APIVersion, pr.Kind = v1alpha1.SchemeGroupVersion.String(), "ProbeRun"
	return pr
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// runPrinter is the text form of a run for outputFormat.print.
// It also sets the object's kind, which a decoded object lacks, for -o json|yaml.
func runPrinter(pr *v1alpha1.ProbeRun) func(io.Writer) error {
	typed(pr)
	return func(w io.Writer) error { return printRun(w, pr) }
}

func printRun(w io.Writer, pr *v1alpha1.ProbeRun) error {
	st := pr.Status
	fmt.Fprintf(w, "proberun %s %s: %s\n", pr.Name, st.Phase, st.Verdict)
	if c := findCondition(st.Conditions, v1alpha1.ProbeRunAccepted); c != nil && c.Status != metav1.ConditionTrue {
		fmt.Fprintf(w, "%s: %s\n", c.Reason, c.Message)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCHECK\tSTATUS\tDURATION\tVALUES\tMESSAGE")
	for _, nr := range st.Nodes {
		name := nr.Node
		if name == "" {
			name = "(cluster)"
		}
		if len(nr.Results) == 0 {
			status := "pending"
			if nr.Done {
				status = nr.Verdict
			}
			if nr.Error != "" {
				status = "error"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t%s\n", name, strings.Join(pr.Spec.Checks, ","), status, nr.Error)
			continue
		}
		for _, res := range nr.Results {
			d := ""
			if res.Duration != nil {
				d = res.Duration.Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, res.Check, res.Status, d, summarizeValues(res), res.Message)
		}
		if nr.Error != "" {
			fmt.Fprintf(tw, "%s\t\terror\t\t\t%s\n", name, nr.Error)
		}
	}
	return tw.Flush()
}

// notCheckedAtZero names the values that echo a parameter whose 0 turns a comparison
// off (nvml's expected_gpus): there 0 means nothing was compared, not a count of 0.
var notCheckedAtZero = map[string]bool{"gpus_expected": true}

// summarizeValues shows each measured metric's minimum over the devices (the one
// that decides), e.g. "h2d_gbps≥2.07 d2h_gbps≥1.94".
func summarizeValues(r v1alpha1.ProbeRunResult) string {
	min := map[string]float64{}
	for _, d := range r.Devices {
		for k, s := range d.Values {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				continue
			}
			if old, ok := min[k]; !ok || v < old {
				min[k] = v
			}
		}
	}
	node := map[string]bool{}
	for k, s := range r.Values {
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			min[k], node[k] = v, true
		}
	}
	keys := make([]string, 0, len(min))
	for k := range min {
		if strings.HasPrefix(k, "min_") || strings.HasSuffix(k, "_threshold") {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 4 {
		keys = keys[:4]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		op := "="
		if len(r.Devices) > 1 && !node[k] {
			op = "≥" // the minimum over the devices
		}
		v := strconv.FormatFloat(min[k], 'f', -1, 64)
		if notCheckedAtZero[k] && min[k] == 0 {
			op, v = "=", "not checked"
		}
		parts[i] = k + op + v
	}
	return strings.Join(parts, " ")
}

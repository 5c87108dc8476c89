package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/rest"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/internal/daemon"
)

func newProbeCmd() *cobra.Command {
	var api, kubeconfig string
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Trigger active probes through the controller and read their results",
		Long: `Trigger active probes through the controller and read their results. The
controller checks who calls with the credentials of the kubeconfig (its bearer token,
or the token an exec plugin gives) and allows what RBAC grants on probes.faultline.io
(ClusterRoles faultline-viewer and faultline-operator).`,
	}
	cmd.PersistentFlags().StringVar(&api, "controller", envOr("FAULTLINE_CONTROLLER", "http://127.0.0.1:9401"), "controller API URL ($FAULTLINE_CONTROLLER)")
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig whose credentials the controller checks (default $KUBECONFIG, then in-cluster)")
	var callAPI apiCall = func(ctx context.Context, method, url string, body []byte, out any) error {
		hc, err := apiHTTPClient(kubeconfig)
		if err != nil {
			return err
		}
		return callAPIWith(ctx, hc, method, url, body, out)
	}

	var (
		nodes, checks []string
		selector      string
		params        []string
		force, wait   bool
		batch         int
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
			req := trigger.Request{Nodes: nodes, Selector: selector, Checks: checks, Force: force, Batch: batch}
			for _, p := range params {
				kv, v, ok := strings.Cut(p, "=")
				check, k, ok2 := strings.Cut(kv, ".")
				if !ok || !ok2 || check == "" || k == "" {
					return fmt.Errorf("--param %q: want check.name=value", p)
				}
				if req.Params == nil {
					req.Params = map[string]probe.Params{}
				}
				if req.Params[check] == nil {
					req.Params[check] = probe.Params{}
				}
				req.Params[check][k] = v
			}
			body, _ := json.Marshal(req)
			var r proberun.Run
			if err := callAPI(cmd.Context(), http.MethodPost, api+"/api/v1/probes", body, &r); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !wait {
				return output.print(out, r, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "run %s started: %s on %d node(s)\nfollow it with: faultline probe get %s --wait\n", r.ID, strings.Join(r.Checks, ","), len(r.Nodes), r.ID)
					return err
				})
			}
			return waitRun(cmd.Context(), callAPI, api, r, timeout, output, out, cmd.ErrOrStderr())
		},
	}
	f := run.Flags()
	f.StringSliceVar(&nodes, "node", nil, "node(s) to probe (repeatable or comma-separated)")
	f.StringVar(&selector, "selector", "", "probe the nodes matching this label selector")
	f.StringSliceVar(&checks, "check", nil, "checks to run: nvml, pciebw, dgemm, dcgm, iperf3, ping, pvc (comma-separated)")
	f.StringArrayVar(&params, "param", nil, "a check's parameter, check.name=value (repeatable), e.g. pciebw.floor_gbps=8")
	f.BoolVar(&force, "force", false, "run invasive checks even while pods hold the node's GPUs")
	f.BoolVar(&wait, "wait", false, "wait for the results, showing progress")
	f.IntVar(&batch, "batch", 0, "nodes probed at once (default: the controller's)")
	f.DurationVar(&timeout, "timeout", time.Hour, "give up waiting after this long")
	addOutputFlag(f, &output)
	_ = run.MarkFlagRequired("check")

	var getWait bool
	get := &cobra.Command{
		Use: "get RUN-ID",
		Example: `  faultline probe get 20261127-101500-4f9a0c2e1b7d
  faultline probe get 20261127-101500-4f9a0c2e1b7d --wait -o yaml`,
		Short: "Show a run (--wait to follow it to the end)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r proberun.Run
			if err := callAPI(cmd.Context(), http.MethodGet, api+"/api/v1/probes/"+args[0], nil, &r); err != nil {
				return err
			}
			if getWait {
				return waitRun(cmd.Context(), callAPI, api, r, timeout, output, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if err := output.print(cmd.OutOrStdout(), r, runPrinter(r)); err != nil {
				return err
			}
			return runExit(r)
		},
	}
	get.Flags().BoolVar(&getWait, "wait", false, "wait until the run is done")
	addOutputFlag(get.Flags(), &output)
	get.Flags().DurationVar(&timeout, "timeout", time.Hour, "give up waiting after this long")

	var listOutput outputFormat
	list := &cobra.Command{
		Use: "list",
		Example: `  faultline probe list
  faultline probe list -o json | jq '.[] | select(.status == "fail") | .id'`,
		Short: "List the runs the controller remembers, newest first",
		RunE: func(cmd *cobra.Command, args []string) error {
			var runs []proberun.Run
			if err := callAPI(cmd.Context(), http.MethodGet, api+"/api/v1/probes", nil, &runs); err != nil {
				return err
			}
			return listOutput.print(cmd.OutOrStdout(), runs, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTRIGGER\tCHECKS\tNODES\tSTATE\tSTATUS\tCREATED")
				for _, r := range runs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.ID, r.Trigger, strings.Join(r.Checks, ","), r.Done(), len(r.Nodes),
						r.State, r.Status, r.Created.Local().Format(time.DateTime))
				}
				return tw.Flush()
			})
		},
	}
	addOutputFlag(list.Flags(), &listOutput)
	cmd.AddCommand(run, get, list)
	return cmd
}

// apiCall calls the controller API and decodes its answer into out.
type apiCall func(ctx context.Context, method, url string, body []byte, out any) error

// waitRun polls a run until it is done, printing progress to errw, then the table.
func waitRun(ctx context.Context, callAPI apiCall, api string, r proberun.Run, timeout time.Duration, output outputFormat, out, errw io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := ""
	for r.State != proberun.StateDone {
		line := fmt.Sprintf("run %s: %d/%d node(s) done, %s elapsed", r.ID, r.Done(), len(r.Nodes), time.Since(start).Round(time.Second))
		if line != last {
			fmt.Fprintln(errw, line)
			last = line
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("run %s not done after %s: %w", r.ID, timeout, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
		if err := callAPI(ctx, http.MethodGet, api+"/api/v1/probes/"+r.ID, nil, &r); err != nil {
			return err
		}
	}
	if err := output.print(out, r, runPrinter(r)); err != nil {
		return err
	}
	return runExit(r)
}

// runExit: 0 when nothing failed, 2 when a check failed or could not run.
func runExit(r proberun.Run) error {
	if r.State == proberun.StateDone && (r.Status == probe.StatusFail || r.Status == probe.StatusError) {
		return exitError{code: 2}
	}
	return nil
}

// runPrinter is the text form of a run for outputFormat.print.
func runPrinter(r proberun.Run) func(io.Writer) error {
	return func(w io.Writer) error { return printRun(w, r) }
}

func printRun(w io.Writer, r proberun.Run) error {
	fmt.Fprintf(w, "run %s (%s) %s: %s\n", r.ID, r.Trigger, r.State, r.Status)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCHECK\tSTATUS\tDURATION\tVALUES\tMESSAGE")
	for _, nr := range r.Nodes {
		name := nr.Node
		if name == proberun.ClusterNode {
			name = "(cluster)"
		}
		if len(nr.Results) == 0 {
			msg := nr.Error
			status := string(nr.State)
			if nr.Error != "" {
				status = "error"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t%s\n", name, strings.Join(r.Checks, ","), status, msg)
			continue
		}
		for _, res := range nr.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, res.Check, res.Status, res.Duration.Round(time.Millisecond),
				summarizeValues(res), res.Message)
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
func summarizeValues(r probe.Result) string {
	min := map[string]float64{}
	for _, d := range r.Devices {
		for k, v := range d.Values {
			if old, ok := min[k]; !ok || v < old {
				min[k] = v
			}
		}
	}
	node := map[string]bool{}
	for k, v := range r.Values {
		min[k], node[k] = v, true
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

// apiHTTPClient is an HTTP client that authenticates as the kubeconfig's user does
// with the apiserver (client-go's transport: bearer tokens, token files, exec
// plugins). The apiserver's CA and client certificate are not the controller's, so
// only the credentials are kept.
func apiHTTPClient(kubeconfig string) (*http.Client, error) {
	rc, err := daemon.KubeRESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("credentials for the controller API: %w", err)
	}
	rc = rest.CopyConfig(rc)
	rc.TLSClientConfig = rest.TLSClientConfig{}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("credentials for the controller API: %w", err)
	}
	return hc, nil
}

func callAPIWith(ctx context.Context, hc *http.Client, method, url string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("controller API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("controller API %s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

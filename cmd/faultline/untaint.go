package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/internal/daemon"
)

// writeUntaintText says what an untaint did in one sentence, the same whether the
// controller or the command itself wrote the Node.
func writeUntaintText(w io.Writer, u controller.UntaintResponse) error {
	if len(u.RemovedTaints) == 0 && len(u.ResolvedFaults) == 0 {
		what := "no fault of faultline's"
		if u.Rule != act.AllRules {
			what = "no fault matching " + u.Rule
		}
		_, err := fmt.Fprintf(w, "node %s: %s recorded, nothing removed\n", u.Node, what)
		return err
	}
	_, err := fmt.Fprintf(w, "node %s: removed %s, resolved %s\n", u.Node,
		countList(len(u.RemovedTaints), "taint", u.RemovedTaints), countList(len(u.ResolvedFaults), "fault record", u.ResolvedFaults))
	return err
}

// countList says "2 taints (a, b)", "1 taint (a)" or "0 taints".
func countList(n int, noun string, items []string) string {
	s := fmt.Sprintf("%d %s", n, noun)
	if n != 1 {
		s += "s"
	}
	if n > 0 {
		s += " (" + strings.Join(items, ", ") + ")"
	}
	return s
}

func newUntaintCmd() *cobra.Command {
	var (
		kubeconfig, rule, reason string
		direct                   bool
		timeout                  time.Duration
		output                   outputFormat
	)
	cmd := &cobra.Command{
		Use:   "untaint NODE",
		Short: "Resolve faultline's faults of a node (their taints go); other taints are left alone",
		Long: `By default, asks the leading controller to resolve each of the node's faults that is
not resolved yet (faultline fault resolve on each NodeFault: a request the API server
authorizes and audits, naming you), and waits for the answers. With --direct, writes
the Node itself instead, as the controller would (when no controller runs): the
taints go and the records are resolved, but nobody's request is recorded.`,
		Example: `  faultline untaint gpu-3 --reason 'GPU reseated'
  faultline untaint gpu-3 --rule nvidia-xid/xid-79
  faultline untaint gpu-3 --direct -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			if rule == "" {
				rule = act.AllRules
			}
			if direct {
				u, err := untaintDirect(cmd.Context(), kubeconfig, node, rule)
				if err != nil {
					return err
				}
				return output.print(cmd.OutOrStdout(), u, func(w io.Writer) error { return writeUntaintText(w, u) })
			}
			answers, err := untaintByRequest(cmd.Context(), kubeconfig, node, rule, reason, timeout)
			if err != nil {
				return err
			}
			return output.print(cmd.OutOrStdout(), answers, func(w io.Writer) error {
				if len(answers) == 0 {
					_, err := fmt.Fprintf(w, "node %s: no unresolved fault of faultline's matches %s\n", node, rule)
					return err
				}
				for _, a := range answers {
					if err := writeAnswer(w, a); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then in-cluster)")
	cmd.Flags().StringVar(&rule, "rule", "", "only this fault (pack/rule or rule id); default all of faultline's")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.Flags().BoolVar(&direct, "direct", false, "write the Node yourself instead of asking the controller (when none runs)")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the controller's answers")
	addOutputFlag(cmd.Flags(), &output)
	return cmd
}

// untaintByRequest asks for Resolve on each unresolved NodeFault of node that
// matches rule (pack/rule, a rule id, or act.AllRules), and waits for the answers.
func untaintByRequest(ctx context.Context, kubeconfig, node, rule, reason string, timeout time.Duration) ([]Answer, error) {
	rq, err := newRequester(kubeconfig)
	if err != nil {
		return nil, err
	}
	store, err := nodefault.New(rq.cs, nodefault.Options{})
	if err != nil {
		return nil, err
	}
	recs, err := store.ForNode(ctx, node, true)
	if err != nil {
		return nil, fmt.Errorf("untaint: the faults of %s: %w", node, err)
	}
	answers := []Answer{}
	for _, nf := range recs {
		if nf.Status.Phase == v1alpha1.PhaseResolved || nf.Spec.Scope == v1alpha1.ScopeFleet ||
			(rule != act.AllRules && rule != nf.Spec.Rule && rule != nf.Spec.Pack+"/"+nf.Spec.Rule) {
			continue
		}
		a, err := rq.ask(ctx, nf.Name, v1alpha1.RequestResolve, reason, timeout)
		if err != nil {
			return answers, err
		}
		answers = append(answers, a)
	}
	return answers, nil
}

// untaintDirect writes the Node itself, as the controller would, and says so as
// the controller's API does.
func untaintDirect(ctx context.Context, kubeconfig, node, rule string) (controller.UntaintResponse, error) {
	client, err := daemon.KubeClient(kubeconfig)
	if err != nil {
		return controller.UntaintResponse{}, err
	}
	a, err := act.New(client, act.Options{})
	if err != nil {
		return controller.UntaintResponse{}, err
	}
	if err := a.Start(ctx); err != nil {
		return controller.UntaintResponse{}, err
	}
	defer a.Shutdown()
	res, err := a.UntaintNode(ctx, node, rule)
	if err != nil {
		return controller.UntaintResponse{}, err
	}
	return controller.NewUntaintResponse(res), nil
}

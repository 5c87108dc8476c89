package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/internal/daemon"
)

// faultRequests are the subcommands of faultline fault: one per request action.
var faultRequests = []struct {
	use    string
	action v1alpha1.RequestAction
	short  string
}{
	{"resolve", v1alpha1.RequestResolve, "Remove a node fault's taint and resolve it (the node was repaired, or the fault was wrong)"},
	{"release", v1alpha1.RequestRelease, "A fleet fault's verdict: taint its held member nodes, within the budgets"},
	{"dismiss", v1alpha1.RequestDismiss, "A fleet fault's verdict: drop its members' held faults, no taint (the shared part was at fault)"},
	{"release-storm", v1alpha1.RequestReleaseStorm, "End the storm that holds this fault's rule: its held faults go ahead within the budgets"},
}

func newFaultCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fault",
		Short: "Ask the controller to act on a fault: a request on its NodeFault, authorized and audited by the API server",
		Long: `Each subcommand writes the request into the NodeFault's spec.request with your
kubeconfig, naming you (the API server's admission policy checks the name), and waits
for the leading controller's answer in status.request. Nothing is sent to the
controller itself. Names: kubectl get nodefaults.`,
	}
	for _, r := range faultRequests {
		var (
			kubeconfig, reason string
			timeout            time.Duration
			output             outputFormat
		)
		sub := &cobra.Command{
			Use:     r.use + " NODEFAULT",
			Short:   r.short,
			Example: "  faultline fault " + r.use + " gpu-3.nvidia-xid.xid-gpu-lost --reason 'GPU reseated'",
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				rq, err := newRequester(kubeconfig)
				if err != nil {
					return err
				}
				ans, err := rq.ask(cmd.Context(), args[0], r.action, reason, timeout)
				if err != nil {
					return err
				}
				return output.print(cmd.OutOrStdout(), ans, func(w io.Writer) error { return writeAnswer(w, ans) })
			},
		}
		sub.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then in-cluster)")
		sub.Flags().StringVar(&reason, "reason", "", "why, for the record")
		sub.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the controller's answer (0: do not wait)")
		addOutputFlag(sub.Flags(), &output)
		cmd.AddCommand(sub)
	}
	return cmd
}

// Answer is a fault's answer to a request, as faultline fault and untaint print it.
type Answer struct {
	Fault string `json:"fault"`
	// Answer is the controller's answer; nil when it was not waited for, or did not
	// come in time.
	Answer *v1alpha1.RequestStatus `json:"answer,omitempty"`
	// Request is the request made.
	Request v1alpha1.Request `json:"request"`
}

func writeAnswer(w io.Writer, a Answer) error {
	if a.Answer == nil {
		_, err := fmt.Fprintf(w, "nodefault %s: %s requested by %s; no answer yet (kubectl get nodefault %s -o jsonpath='{.status.request}')\n",
			a.Fault, a.Request.Action, a.Request.RequestedBy, a.Fault)
		return err
	}
	_, err := fmt.Fprintf(w, "nodefault %s: %s by %s: %s: %s\n", a.Fault, a.Answer.Action, a.Answer.RequestedBy, a.Answer.Result, a.Answer.Message)
	return err
}

// requester makes requests on NodeFaults as the kubeconfig's user.
type requester struct {
	cs   kubernetes.Interface
	rc   *rest.RESTClient
	user string
}

func newRequester(kubeconfig string) (*requester, error) {
	cfg, err := daemon.KubeRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := v1alpha1.NewRESTClient(cs)
	if err != nil {
		return nil, err
	}
	return &requester{cs: cs, rc: rc}, nil
}

// whoAmI is the username the API server authenticates the kubeconfig as: the name a
// request must carry.
func (r *requester) whoAmI(ctx context.Context) (string, error) {
	if r.user != "" {
		return r.user, nil
	}
	rev, err := r.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("who am I (SelfSubjectReview): %w", err)
	}
	r.user = rev.Status.UserInfo.Username
	return r.user, nil
}

// ask writes the request into the NodeFault and waits up to timeout for its answer.
func (r *requester) ask(ctx context.Context, name string, action v1alpha1.RequestAction, reason string, timeout time.Duration) (Answer, error) {
	user, err := r.whoAmI(ctx)
	if err != nil {
		return Answer{}, err
	}
	req := v1alpha1.Request{Action: action, RequestedBy: user, Reason: reason, Time: metav1.NewTime(time.Now().Truncate(time.Second))}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"request": req}})
	if err != nil {
		return Answer{}, err
	}
	if err := r.rc.Patch(types.MergePatchType).Resource("nodefaults").Name(name).Body(patch).Do(ctx).Error(); err != nil {
		return Answer{}, fmt.Errorf("request %s on nodefault %s: %w", action, name, err)
	}
	out := Answer{Fault: name, Request: req}
	if timeout <= 0 {
		return out, nil
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var nf v1alpha1.NodeFault
		if err := r.rc.Get().Resource("nodefaults").Name(name).Do(ctx).Into(&nf); err != nil {
			return false, nil // transient: asked again
		}
		if a := nf.Status.Request; a != nil && a.Action == req.Action && a.Time.Equal(&req.Time) && a.RequestedBy == req.RequestedBy {
			out.Answer = a
			return true, nil
		}
		return false, nil
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return out, err
	}
	return out, nil
}

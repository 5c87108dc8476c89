package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// waitFor polls cond until it holds or the step times out (a failed check, not an
// abort: the scenario goes on and the summary says what did not hold).
func (d *demo) waitFor(ctx context.Context, what string, cond func() (bool, string)) (time.Duration, bool, string) {
	t0 := time.Now()
	err := eventually.Wait(ctx, d.o.StepTimeout, func() error {
		if ok, why := cond(); !ok {
			return errors.New(why)
		}
		return nil
	})
	if err != nil {
		return time.Since(t0), false, fmt.Sprintf("gave up waiting for %s after %s: %v", what, d.o.StepTimeout, err)
	}
	return time.Since(t0), true, ""
}

// logql runs a LogQL query over the last hour, oldest line first.
func (d *demo) logql(ctx context.Context, query string) ([]string, error) {
	es, err := testenv.QueryLoki(ctx, d.env.LokiURL(), query, time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s {node=%q, source=%q} %s", e.Time.Format(time.TimeOnly), e.Labels["node"], e.Labels["source"], e.Line))
	}
	return out, nil
}

func (d *demo) nodeTable(ctx context.Context) {
	list, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		d.say("        %v", err)
		return
	}
	w := bufio.NewWriter(d.out)
	fmt.Fprintf(w, "        %-8s %-10s %s\n", "NAME", "HEALTH", "TAINTS")
	for i := range list.Items {
		n := &list.Items[i]
		h := n.Labels["faultline.io/health"]
		if h == "" {
			h = "<none>"
		}
		fmt.Fprintf(w, "        %-8s %-10s %s\n", n.Name, h, taintText(n))
	}
	w.Flush()
}

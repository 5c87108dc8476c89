package demo

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/test/testenv"
)

// ladder repeats gpu-3's Xid 79 so that its fault climbs the demo pack's ladder:
// drain on the first repeat, service on the second.
func (d *demo) ladder(ctx context.Context, xid79 string) {
	d.step("Scenario 4/9: gpu-3's GPU falls off the bus again, twice (the demo pack gives xid-gpu-lost a ladder: drain, then service)")
	for _, want := range []struct {
		step   int32
		action string
	}{{1, "drain"}, {2, "service"}} {
		d.say("        kernel: %s", xid79)
		_ = d.kmsg["gpu-3"].write(3, xid79)
		var e v1alpha1.Escalation
		took, ok, why := d.waitFor(ctx, "gpu-3's step "+want.action, func() (bool, string) {
			nf, err := d.faultOf(ctx, "gpu-3", "xid-gpu-lost")
			if err != nil {
				return false, err.Error()
			}
			if nf.Status.Escalation == nil {
				return false, "no escalation yet"
			}
			e = *nf.Status.Escalation
			return e.Step == want.step && e.State == v1alpha1.StepDone, fmt.Sprintf("step %d %s %s", e.Step, e.Action, e.State)
		})
		if ok {
			d.say("        → step %d %s (%s) after %s: %s; %s", e.Step, e.Action, e.State, took.Round(time.Millisecond), e.Reason, clip(e.Message, 120))
		}
		d.check(fmt.Sprintf("Xid 79 again on gpu-3 → ladder step %d (%s)", want.step, want.action), ok, why)
	}
	n, err := d.cs.CoreV1().Nodes().Get(ctx, "gpu-3", metav1.GetOptions{})
	service := err == nil && n.Labels["faultline.io/service"] == "required"
	d.check("gpu-3 handed to the hardware team (label faultline.io/service=required)", service, errText(err))
}

// fleet makes the rest of rack-a's link flap: with gpu-2's flaps of scenario 3 that
// is three nodes of one rack within the fleet window, so one fleet fault is raised
// and the rack's later faults of the pack wait for an operator's verdict.
func (d *demo) fleet(ctx context.Context) {
	d.step("Scenario 5/9: the links of gpu-0 and gpu-1 flap too: with gpu-2, three nodes of %s=%s (one switch, most likely)", rackLabel, rackOf(0))
	for _, n := range []string{"gpu-0", "gpu-1"} {
		for i := 0; i < 3; i++ {
			_ = d.kmsg[n].write(3, "mlx5_core 0000:18:00.0 ens1np0: Link down")
			_ = d.kmsg[n].write(6, "mlx5_core 0000:18:00.0 ens1np0: Link up")
		}
	}
	var ff v1alpha1.NodeFault
	took, ok, why := d.waitFor(ctx, "a fleet fault", func() (bool, string) {
		list, err := d.nodeFaults(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, nf := range list {
			// The record is created, then its status (members, phase) written.
			if nf.Spec.Scope == v1alpha1.ScopeFleet {
				ff = nf
				return len(nf.Status.Members) >= rackSize, fmt.Sprintf("fleet fault %s with members %v", nf.Name, nf.Status.Members)
			}
		}
		return false, "no fleet fault yet"
	})
	if ok {
		d.say("        → fleet fault %s after %s: group %s, family %s, members %s, phase %s",
			ff.Name, took.Round(time.Millisecond), ff.Spec.Node, ff.Spec.Pack, strings.Join(ff.Status.Members, ","), ff.Status.Phase)
		d.say("          an operator's verdict: faultline fault release %s (taint the held members) or faultline fault dismiss %s", ff.Name, ff.Name)
	}
	d.check("link flaps on three nodes of rack-a → one fleet fault", ok && ff.Spec.Group != nil && ff.Spec.Group.Value == rackOf(0), why)
}

// nodeFaultTable prints the NodeFault records as kubectl lists them (the CRD's
// printer columns, served by the apiserver).
func (d *demo) nodeFaultTable(ctx context.Context) {
	d.step("NodeFaults: kubectl get nodefaults")
	out, err := d.kubectl(ctx, "get", "nodefaults")
	d.sayIndented(out, err)
}

// describeNodeFault prints kubectl describe of a NodeFault, once its Events are
// there too (the recorder sends them a moment after the write they report).
func (d *demo) describeNodeFault(ctx context.Context, name, event string) {
	d.say("        $ kubectl describe nodefault %s", name)
	var (
		out []byte
		err error
	)
	d.waitFor(ctx, "the Event "+event+" on NodeFault "+name, func() (bool, string) {
		out, err = d.kubectl(ctx, "describe", "nodefault", name)
		return err == nil && strings.Contains(string(out), event), "not listed yet"
	})
	d.sayIndented(out, err)
}

// kubectl runs kubectl, from the components' tools, against the demo's apiserver.
func (d *demo) kubectl(ctx context.Context, args ...string) ([]byte, error) {
	args = append([]string{"--kubeconfig", d.env.Kubeconfig()}, args...)
	return exec.CommandContext(ctx, testenv.Binary(d.tb, "kubectl"), args...).CombinedOutput()
}

// sayIndented prints a command's output under the narration's step.
func (d *demo) sayIndented(out []byte, err error) {
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		d.say("        %s", l)
	}
	if err != nil {
		d.say("        kubectl: %v", err)
	}
}

func (d *demo) nodeFaults(ctx context.Context) ([]v1alpha1.NodeFault, error) {
	st, err := nodefault.New(d.cs, nodefault.Options{})
	if err != nil {
		return nil, err
	}
	return st.List(ctx)
}

// faultOf finds the NodeFault of rule on node.
func (d *demo) faultOf(ctx context.Context, node, rule string) (*v1alpha1.NodeFault, error) {
	list, err := d.nodeFaults(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Spec.Node == node && list[i].Spec.Rule == rule {
			return &list[i], nil
		}
	}
	return nil, fmt.Errorf("no NodeFault of %s on %s", rule, node)
}

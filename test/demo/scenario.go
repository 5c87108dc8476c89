package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// nvmlRound runs the hourly nvml check once now, as a ProbeRun the demo's operator
// creates, so every node has a health label before the scenario starts.
func (d *demo) nvmlRound(ctx context.Context) {
	d.step("A first round of the nvml check on every node (a ProbeRun, as faultline probe run creates it; the controller runs it every %s here, --probe-schedule, hourly by default)", nvmlEvery)
	cs, err := kubernetes.NewForConfig(d.env.RESTConfigForToken(d.apiToken))
	if err != nil {
		d.tb.Fatalf("start the nvml round: %v", err)
	}
	rc, err := v1alpha1.NewRESTClient(cs)
	if err != nil {
		d.tb.Fatalf("start the nvml round: %v", err)
	}
	run := &v1alpha1.ProbeRun{}
	err = rc.Post().Resource(v1alpha1.ProbeRunResource).Body(&v1alpha1.ProbeRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
		Spec: v1alpha1.ProbeRunSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"nvidia.com/gpu.present": "true"}},
			Checks: []string{"nvml"}, Params: map[string]map[string]string{"nvml": {"expected_gpus": "8"}}},
	}).Do(ctx).Into(run)
	if err != nil {
		d.tb.Fatalf("start the nvml round: %v", err)
	}
	name := run.Name
	d.say("        proberun %s (spec.nodeSelector nvidia.com/gpu.present=true, checks [nvml], nvml.expected_gpus=8)", name)
	took, ok, why := d.waitFor(ctx, "the nvml round", func() (bool, string) {
		run = &v1alpha1.ProbeRun{}
		if err := rc.Get().Resource(v1alpha1.ProbeRunResource).Name(name).Do(ctx).Into(run); err != nil {
			return false, err.Error()
		}
		return run.Status.Finished(), "phase " + string(run.Status.Phase)
	})
	st := run.Status
	if ok && len(st.Nodes) > 0 && len(st.Nodes[0].Results) > 0 {
		d.say("        → %s: %s on %d nodes in %s (%s)", st.Phase, st.Verdict, st.NodeCount, took.Round(time.Millisecond), st.Nodes[0].Results[0].Message)
	}
	if ok && st.Phase != v1alpha1.ProbeRunCompleted {
		why = fmt.Sprintf("phase %s: %+v", st.Phase, st.Conditions)
	}
	d.check("nvml passes on every node (label faultline.io/health=PASS)", ok && st.Phase == v1alpha1.ProbeRunCompleted && st.Verdict == "pass", why)
}

// scenario plays the faults and checks what faultline did about each.
func (d *demo) scenario(ctx context.Context) {
	const (
		xid13 = "NVRM: Xid (PCI:0000:4e:00): 13, pid=48213, name=python3, Graphics Exception: ESR 0x504648=0x11f000e"
		xid79 = "NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	)
	d.step("Scenario 1/9: gpu-1 logs an Xid 13 (a graphics exception: usually the application's bug, not the GPU's)")
	d.say("        kernel: %s", xid13)
	_ = d.kmsg["gpu-1"].write(3, xid13)
	took, ok, why := d.waitFor(ctx, "an Event on gpu-1", func() (bool, string) {
		return len(d.events(ctx, "gpu-1", "FaultEvent")) > 0, "no FaultEvent yet"
	})
	if ok {
		ev := d.events(ctx, "gpu-1", "FaultEvent")[0]
		d.say("        → Event %s on node gpu-1 after %s: %s", ev.Reason, took.Round(time.Millisecond), clip(ev.Message, 160))
	}
	d.check("Xid 13 on gpu-1 → an Event", ok, why)
	d.check("gpu-1 not tainted", !d.tainted(ctx, "gpu-1"), "")

	d.step("Scenario 2/9: gpu-3, running Job %s/%s, logs an Xid 79 (the GPU has fallen off the bus: the node must be drained)", trainingNS, trainingJobs[0].name)
	d.say("        kernel: %s", xid79)
	_ = d.kmsg["gpu-3"].write(3, xid79)
	took, ok, why = d.waitFor(ctx, "gpu-3 tainted", func() (bool, string) { return d.tainted(ctx, "gpu-3"), "not tainted yet" })
	if ok {
		n, _ := d.cs.CoreV1().Nodes().Get(ctx, "gpu-3", metav1.GetOptions{})
		d.say("        → gpu-3 tainted %s after %s (kernel line → exporter → collector → Loki → controller → taint)",
			taintText(n), took.Round(time.Millisecond))
		ptr := n.Annotations[fault.AnnotationFaults]
		nf, err := d.nodeFault(ctx, strings.Split(ptr, ",")[0])
		if err == nil && len(nf.Status.Evidence) > 0 {
			d.say("          evidence (NodeFault %s, named by the node's annotation %s): rule %s/%s, phase %s, %d line(s), first: %q",
				nf.Name, fault.AnnotationFaults, nf.Spec.Pack, nf.Spec.Rule, nf.Status.Phase, len(nf.Status.Evidence), clip(nf.Status.Evidence[0].Text, 100))
			d.check("Xid 79 on gpu-3 → tainted with the evidence in its NodeFault", strings.Contains(nf.Status.Evidence[0].Text, "79"), "")
			d.say("          what the record says (what, why, what was done, what happens next):")
			d.describeNodeFault(ctx, nf.Name, "FaultTainted")
			d.jobTouched(ctx, nf, trainingJobs[0])
		} else {
			d.check("Xid 79 on gpu-3 → tainted with the evidence in its NodeFault", false, fmt.Sprintf("NodeFault %q: %v", ptr, err))
		}
	} else {
		d.check("Xid 79 on gpu-3 → tainted", false, why)
	}

	d.step("Scenario 3/9: gpu-2's NIC flaps (link down/up three times in a minute)")
	d.say("        the demo's site pack turns link-flap into action: probe — confirm with a network probe before tainting")
	for i := 0; i < 3; i++ {
		_ = d.kmsg["gpu-2"].write(3, "mlx5_core 0000:18:00.0 ens1np0: Link down")
		_ = d.kmsg["gpu-2"].write(6, "mlx5_core 0000:18:00.0 ens1np0: Link up")
	}
	// The probe result of this rule (the nvml round left its own Event on every node).
	ruleResult := func() []corev1.Event {
		var out []corev1.Event
		for _, e := range append(d.events(ctx, "gpu-2", "ProbePassed"), d.events(ctx, "gpu-2", "ProbeFailed")...) {
			if strings.Contains(e.Message, "link-flap") {
				out = append(out, e)
			}
		}
		return out
	}
	took, ok, why = d.waitFor(ctx, "the probe result of link-flap on gpu-2", func() (bool, string) {
		return len(ruleResult()) > 0, "no probe result yet"
	})
	if ok {
		evs := ruleResult()
		d.say("        → the rule fired and asked for a probe; %s after %s: %s", evs[0].Reason, took.Round(time.Millisecond), clip(evs[0].Message, 200))
		passed := evs[0].Reason == "ProbePassed"
		decision := "the network probe passed: gpu-2 stays schedulable (a flap without lasting damage)"
		if !passed {
			decision = "the network probe failed: gpu-2 is tainted"
		}
		d.say("        → decision: %s", decision)
		// The decision follows the result at once; give the taint (if any) and the
		// health label a moment to show in the Node.
		d.waitFor(ctx, "gpu-2's health label", func() (bool, string) {
			n, err := d.cs.CoreV1().Nodes().Get(ctx, "gpu-2", metav1.GetOptions{})
			return err == nil && n.Labels["faultline.io/health"] != "TESTING", "still TESTING"
		})
		time.Sleep(500 * time.Millisecond)
		d.check("link flaps on gpu-2 → a confirming probe, then the decision", passed == !d.tainted(ctx, "gpu-2"),
			fmt.Sprintf("probe %s, tainted %v", evs[0].Reason, d.tainted(ctx, "gpu-2")))
	} else {
		d.check("link flaps on gpu-2 → a confirming probe", false, why)
	}

	d.ladder(ctx, xid79)
	d.fleet(ctx)
	d.busy(ctx)
	d.lostGPU(ctx)
	d.sxidGroup(ctx)
	d.forgedLine(ctx)

	d.step("What a user types in Grafana (Explore → Loki): {node=\"gpu-3\"} |= \"Xid\"")
	lines, err := d.logql(ctx, `{node="gpu-3"} |= "Xid"`)
	for _, l := range lines {
		d.say("        %s", l)
	}
	d.check("LogQL finds the Xid line in Loki", err == nil && len(lines) > 0 && strings.Contains(strings.Join(lines, "\n"), "Xid"), errText(err))

	d.step("Nodes, as kubectl would list them")
	d.nodeTable(ctx)
	d.nodeFaultTable(ctx)
}

func (d *demo) events(ctx context.Context, node, reason string) []corev1.Event {
	sel := fields.Set{"involvedObject.name": node, "reason": reason}.AsSelector().String()
	var out []corev1.Event
	for _, namespace := range []string{"default", ns} {
		l, err := d.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil {
			out = append(out, l.Items...)
		}
	}
	return out
}

func (d *demo) tainted(ctx context.Context, node string) bool {
	n, err := d.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "faultline.io/") {
			return true
		}
	}
	return false
}

func taintText(n *corev1.Node) string {
	var ts []string
	if n == nil {
		return ""
	}
	for _, t := range n.Spec.Taints {
		ts = append(ts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	if len(ts) == 0 {
		return "<none>"
	}
	return strings.Join(ts, ",")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// nodeFault reads a NodeFault record (waiting briefly: the record's evidence is
// written just after the taint).
func (d *demo) nodeFault(ctx context.Context, name string) (*v1alpha1.NodeFault, error) {
	st, err := nodefault.New(d.cs, nodefault.Options{})
	if err != nil {
		return nil, err
	}
	var nf *v1alpha1.NodeFault
	for i := 0; i < 50; i++ {
		if nf, err = st.Get(ctx, name); err == nil && len(nf.Status.Evidence) > 0 {
			return nf, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nf, err
}

package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// The nodes of scenarios 7 and 8.
const (
	lostGPUNode = "gpu-5"
	switchNode  = "gpu-6"
)

// jobTouched checks what the pod of the job on a faulty node is told: the fault's
// record lists it with its Job, and the pod carries a Warning Event naming the fault.
func (d *demo) jobTouched(ctx context.Context, nf *v1alpha1.NodeFault, tj trainingJob) {
	var listed bool
	if a := nf.Status.Affected; a != nil {
		for _, p := range a.Pods {
			if p.Name == tj.podName() && p.Owner != nil && p.Owner.Kind == "Job" && p.Owner.Name == tj.name {
				listed = true
				d.say("          affected: pod %s/%s (%d GPUs) of %s %s", p.Namespace, p.Name, p.GPUs, p.Owner.Kind, p.Owner.Name)
			}
		}
	}
	d.check(fmt.Sprintf("the fault's record lists the pod of Job %s that held %s's GPUs", tj.name, tj.node), listed, "")
	var ev corev1.Event
	took, ok, why := d.waitFor(ctx, "the Warning Event on pod "+tj.podName(), func() (bool, string) {
		sel := fields.Set{"involvedObject.name": tj.podName(), "reason": "NodeFault"}.AsSelector().String()
		l, err := d.cs.CoreV1().Events(trainingNS).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		if len(l.Items) == 0 {
			return false, "no Event yet"
		}
		ev = l.Items[0]
		return true, ""
	})
	if ok {
		d.say("        → the ML engineer sees why the job died (kubectl describe pod -n %s %s), after %s:", trainingNS, tj.podName(), took.Round(time.Millisecond))
		d.say("          %s %s: %s", ev.Type, ev.Reason, clip(ev.Message, 300))
	}
	d.check(fmt.Sprintf("pod %s on %s has a Warning Event naming the fault", tj.podName(), tj.node),
		ok && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, nf.Name), why)
}

// busy: a PCIe error on a node whose GPUs a training pod holds. The rule asks for
// pciebw (invasive: it would load the GPUs the job uses) and nvml (harmless): nvml
// runs at once, pciebw waits for idle GPUs, and meanwhile the node carries the
// unconfirmed taint (no new work lands; the running job is not disturbed). When the
// job ends, pciebw runs and decides.
func (d *demo) busy(ctx context.Context) {
	const aer = "pcieport 0000:80:03.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:81:00.0"
	tj := trainingJobs[1]
	d.step("Scenario 6/9: %s, busy with Job %s/%s, logs a PCIe AER uncorrectable (non-fatal) error", busyNode, trainingNS, tj.name)
	d.say("        kernel: %s", aer)
	d.say("        the rule asks for pciebw (invasive: it loads the GPUs) and nvml (harmless) before tainting")
	_ = d.kmsg[busyNode].write(3, aer)
	took, ok, why := d.waitFor(ctx, busyNode+" unconfirmed and waiting for idle GPUs", func() (bool, string) {
		nf, err := d.faultOf(ctx, busyNode, "aer-nonfatal")
		if err != nil {
			return false, err.Error()
		}
		v := d.taintValue(ctx, busyNode, "faultline.io/faulty")
		return v == v1alpha1.UnconfirmedTaintValue && nf.Status.Phase == v1alpha1.PhaseAwaitingIdle,
			fmt.Sprintf("taint %q, phase %s", v, nf.Status.Phase)
	})
	if ok {
		nf, _ := d.faultOf(ctx, busyNode, "aer-nonfatal")
		d.say("        → after %s: nvml ran at once and passed; pciebw waits for the GPUs", took.Round(time.Millisecond))
		d.say("          taint faultline.io/faulty=%s:NoSchedule (no new work lands; the running job is not disturbed)", v1alpha1.UnconfirmedTaintValue)
		d.say("          NodeFault %s: phase %s (%s: %s)", nf.Name, nf.Status.Phase, nf.Status.Reason, clip(nf.Status.Message, 160))
	}
	d.check(busyNode+" busy: AER → the unconfirmed taint, phase AwaitingIdle", ok, why)

	d.say("        the job ends (its pod Succeeded): the kubelet no longer lists it on %s's GPUs", busyNode)
	if err := d.finish(ctx, tj); err != nil {
		d.check("the busy node's job ends", false, err.Error())
		return
	}
	var nf *v1alpha1.NodeFault
	took, ok, why = d.waitFor(ctx, busyNode+"'s pciebw verdict", func() (bool, string) {
		var err error
		if nf, err = d.faultOf(ctx, busyNode, "aer-nonfatal"); err != nil {
			return false, err.Error()
		}
		v := d.taintValue(ctx, busyNode, "faultline.io/faulty")
		confirmed := v == "aer-nonfatal" && nf.Status.Phase == v1alpha1.PhaseTainted
		cleared := v == "" && nf.Status.Phase == v1alpha1.PhaseResolved
		return confirmed || cleared, fmt.Sprintf("taint %q, phase %s", v, nf.Status.Phase)
	})
	if ok {
		verdict := "no verdict"
		if n := len(nf.Status.Probes); n > 0 {
			verdict = fmt.Sprintf("%s: %s", nf.Status.Probes[n-1].Verdict, clip(nf.Status.Probes[n-1].Message, 160))
		}
		d.say("        → %s after %s: pciebw ran; %s", busyNode, took.Round(time.Millisecond), verdict)
		d.say("          taint now: %s; phase %s", d.taintText(ctx, busyNode), nf.Status.Phase)
	}
	// GPU 3 of this node moves 2 GB/s (its link is damaged): the taint is confirmed.
	d.check(busyNode+" idle: pciebw ran → the taint confirmed (aer-nonfatal)", ok && nf.Status.Phase == v1alpha1.PhaseTainted, why)
}

// lostGPU: a GPU of an idle node falls off the bus without a kernel line reaching
// the logs (a node that hung and rebooted with seven GPUs looks like this). The
// scheduled nvml check finds seven GPUs where the node's nvidia.com/gpu capacity says
// eight; its verdict line (source="probe") reaches Loki like any log line, and the
// default probe-verdicts pack taints the node.
func (d *demo) lostGPU(ctx context.Context) {
	d.step("Scenario 7/9: a GPU of %s is lost, silently (no kernel line): the scheduled nvml check (every %s here) finds it", lostGPUNode, nvmlEvery)
	d.machines[lostGPUNode].lost.Store(true)
	var nf *v1alpha1.NodeFault
	took, ok, why := d.waitFor(ctx, lostGPUNode+" tainted by its scheduled check", func() (bool, string) {
		var err error
		nf, err = d.faultOf(ctx, lostGPUNode, "probe-gpus-missing")
		if err != nil {
			return false, err.Error()
		}
		return nf.Status.Taint != nil && nf.Status.Taint.State == v1alpha1.TaintPlaced, "phase " + string(nf.Status.Phase)
	})
	if ok && len(nf.Status.Evidence) > 0 {
		d.say("        → %s tainted %s after %s; evidence (the agent's verdict line, source=\"probe\"):", lostGPUNode, d.taintText(ctx, lostGPUNode), took.Round(time.Millisecond))
		d.say("          %s", clip(nf.Status.Evidence[len(nf.Status.Evidence)-1].Text, 200))
	}
	d.check(lostGPUNode+": scheduled nvml finds 7 of 8 GPUs → tainted (probe-verdicts/probe-gpus-missing)",
		ok && len(nf.Status.Evidence) > 0 && strings.Contains(nf.Status.Evidence[len(nf.Status.Evidence)-1].Text, "found 7 GPUs, expected 8"), why)
}

// sxidGroup: an NVSwitch reports a fatal error as three lines (summary, severity,
// data); they make one fault whose evidence holds all three.
func (d *demo) sxidGroup(ctx context.Context) {
	lines := []string{
		"nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
		"nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 20034, Severity 1 Engine instance 30 Sub-engine instance 00",
		"nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 20034, Data {0x50610002, 0x10100030, 0x00000000, 0x10100030, 0x00000000, 0x00000000, 0x00000000, 0x00000000}",
	}
	d.step("Scenario 8/9: an NVSwitch of %s reports a fatal SXid: three lines (summary, severity, data)", switchNode)
	for _, l := range lines {
		d.say("        kernel: %s", l)
	}
	_ = d.kmsg[switchNode].write(3, lines...)
	var nf *v1alpha1.NodeFault
	took, ok, why := d.waitFor(ctx, switchNode+"'s SXid fault with the whole group", func() (bool, string) {
		var err error
		if nf, err = d.faultOf(ctx, switchNode, "sxid-fatal"); err != nil {
			return false, err.Error()
		}
		return len(nf.Status.Evidence) >= len(lines) && d.taintValue(ctx, switchNode, "faultline.io/faulty") != "",
			fmt.Sprintf("%d evidence line(s), taint %q", len(nf.Status.Evidence), d.taintValue(ctx, switchNode, "faultline.io/faulty"))
	})
	if ok {
		d.say("        → one fault, NodeFault %s, tainted after %s, its evidence:", nf.Name, took.Round(time.Millisecond))
		for _, e := range nf.Status.Evidence {
			d.say("          %s", clip(e.Text, 120))
		}
	}
	all := ok
	if ok {
		for _, l := range lines {
			found := false
			for _, e := range nf.Status.Evidence {
				found = found || strings.Contains(e.Text, l)
			}
			all = all && found
		}
	}
	d.check(switchNode+": an SXid group → one fault whose evidence holds its three lines", all, why)
	if list, err := d.nodeFaults(ctx); err == nil {
		n := 0
		for _, f := range list {
			if f.Spec.Node == switchNode {
				n++
			}
		}
		d.check(switchNode+" has one NodeFault", n == 1, fmt.Sprintf("%d", n))
	}
}

// taintValue is the value of node's NoSchedule taint key ("" when absent).
func (d *demo) taintValue(ctx context.Context, node, key string) string {
	n, err := d.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return t.Value
		}
	}
	return ""
}

func (d *demo) taintText(ctx context.Context, node string) string {
	n, _ := d.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	return taintText(n)
}

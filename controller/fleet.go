package controller

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// reasonFleetFault is the reason of the Event posted on a fleet fault's record when
// it is raised; reasonFleetFaultDryRun that of the Event on the controller's Pod
// when one would have been raised in dry-run.
const (
	reasonFleetFault       = "FleetFault"
	reasonFleetFaultDryRun = "FleetFaultDryRun"
)

// fleetBook writes the fleet faults the decider tracks to their records, and
// carries out an operator's verdict on one.
type fleetBook struct {
	decider   *decide.Decider
	rec       *recorder
	actor     *act.Actor
	decisions *prometheus.CounterVec
	pending   *prometheus.GaugeVec
	log       *slog.Logger
	dryRun    bool
	// pod is the controller's Pod (nil: unknown), where dry-run's Events go.
	pod *corev1.Pod

	mu sync.Mutex
	// written: fleet fault record name → what was last written to it.
	written map[string]fleetWritten
}

// fleetWritten is what was last written to a fleet fault's record.
type fleetWritten struct {
	members int
	rules   string
	verdict decide.Verdict
}

// sync writes the fleet faults the decider tracks to their NodeFault records
// (only those changed since the last write), posts an Event when one is raised,
// and sets the fleet fault gauge.
func (b *fleetBook) sync(ctx context.Context) {
	fleets := b.decider.Fleet().Faults()
	if b.dryRun {
		b.reportDryRun(fleets)
		return
	}
	b.pending.Reset()
	for _, f := range fleets {
		if f.Pending() {
			b.pending.WithLabelValues(f.Group.Label, f.Family).Inc()
		}
		g := v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}
		name := nodefault.FleetName(g, f.Family)
		w := fleetWritten{members: len(f.Members), rules: strings.Join(f.Rules, ","), verdict: f.Verdict}
		b.mu.Lock()
		last, seen := b.written[name]
		b.mu.Unlock()
		if seen && last == w {
			continue
		}
		ch := nodefault.FleetChange{Group: g, Family: f.Family, Since: f.Since, Members: f.Members,
			Rules: f.Rules, Severity: string(f.Severity), Mode: f.Mode,
			Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseRaise, Reason: string(decide.ReasonFleet),
			Message: fmt.Sprintf("%d nodes of %s hit pack %s (threshold %d); their taints for the pack are held: release or dismiss it (faultline fault release %s, or dismiss: a request on this NodeFault)",
				len(f.Members), f.Group, f.Family, f.Threshold, name)}
		switch f.Verdict {
		case decide.VerdictReleased:
			ch.Phase, ch.Cause, ch.Reason, ch.Decision = v1alpha1.PhaseResolved, nodefault.CauseVerdict, string(f.Verdict), "release"
			ch.Message = "released by an operator: the members' faults go ahead as node faults, within the budgets"
		case decide.VerdictDismissed:
			ch.Phase, ch.Cause, ch.Reason, ch.Decision = v1alpha1.PhaseResolved, nodefault.CauseVerdict, string(f.Verdict), "dismiss"
			ch.Message = "dismissed by an operator: the shared part is blamed; the members' held faults are dropped without a taint"
		default:
			if !seen {
				ch.Decision = "hold-fleet"
			}
		}
		nf, raised, err := b.rec.store.RecordFleet(ctx, ch)
		if err != nil {
			b.rec.errors.Inc()
			b.log.Warn("fleet fault record not written", "fleet", name, "err", err)
			continue
		}
		b.mu.Lock()
		if len(b.written) > decide.MaxFleetGroups {
			b.written = map[string]fleetWritten{}
		}
		b.written[name] = w
		b.mu.Unlock()
		if raised {
			b.log.Warn("fleet fault raised", "fleet", name, "group", f.Group.String(), "pack", f.Family, "members", f.Members)
			if err := b.actor.EventOn(nf, corev1.EventTypeWarning, reasonFleetFault, ch.Message); err != nil {
				b.log.Warn("event not recorded", "fleet", name, "err", err)
			}
		}
		if f.Pending() {
			b.holdConfirming(ctx, f, name)
		}
	}
}

// holdConfirming moves the members' faults of the family whose confirming probe
// is still running to Held (reason fleet): they wait on the fleet fault now. The
// probe's verdict still counts: a pass resolves the fault, a failure holds it in
// the decider's queue for the fleet fault's verdict.
func (b *fleetBook) holdConfirming(ctx context.Context, f decide.FleetFault, name string) {
	for _, node := range f.Members {
		recs, err := b.rec.store.ForNode(ctx, node, false)
		if err != nil {
			b.rec.errors.Inc()
			b.log.Warn("fleet fault members' records not read", "fleet", name, "node", node, "err", err)
			continue
		}
		for i := range recs {
			nf := &recs[i]
			if nf.Spec.Pack != f.Family || nf.Status.Phase != v1alpha1.PhaseConfirming {
				continue
			}
			_, err := b.rec.store.RecordOn(ctx, nf, nodefault.Change{Phase: v1alpha1.PhaseHeld, Cause: nodefault.CauseHold,
				OnlyIn: v1alpha1.PhaseConfirming, Reason: string(decide.ReasonFleet), Decision: "hold-" + string(decide.ReasonFleet),
				Message: "waits on the fleet fault " + name + " (its confirming probe still runs: a pass resolves it)"})
			if err != nil {
				b.rec.errors.Inc()
				b.log.Warn("NodeFault not written", "node", node, "rule", nf.PackRule(), "err", err)
			}
		}
	}
}

// verdict applies an operator's verdict (release or dismiss) to the pending fleet
// fault whose record is name; the caller saves it with the position and writes the
// records (sync). A fault with no pending verdict is a refusal.
func (b *fleetBook) verdict(ctx context.Context, name string, v decide.Verdict) error {
	var target *decide.FleetFault
	for _, f := range b.decider.Fleet().Faults() {
		if f.Pending() && nodefault.FleetName(v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}, f.Family) == name {
			target = &f
			break
		}
	}
	if target == nil {
		return refuse("no pending fleet fault %s", name)
	}
	switch v {
	case decide.VerdictReleased:
		if !b.decider.Fleet().Release(target.Group, target.Family) {
			return refuse("fleet fault %s got a verdict meanwhile", name)
		}
	case decide.VerdictDismissed:
		dropped, ok := b.decider.Fleet().Dismiss(target.Group, target.Family)
		if !ok {
			return refuse("fleet fault %s got a verdict meanwhile", name)
		}
		for _, h := range dropped {
			f := h.Fault
			b.rec.write(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Phase: v1alpha1.PhaseResolved, Cause: nodefault.CauseDismiss, Reason: string(v),
				Message: "dismissed with the fleet fault " + name + ": the shared part is blamed, not the node", Decision: "dismiss"})
		}
	default:
		return refuse("unknown verdict %s", v)
	}
	b.log.Warn("fleet fault verdict by an operator", "fleet", name, "verdict", v, "members", strings.Join(target.Members, ","))
	return nil
}

// reportDryRun reports the fleet faults dry-run would have raised, each once
// while it lasts: a log line, an Event on the controller's Pod (there is no record
// to post it on) and decisions{action="dry-run-fleet-fault"}. No record is
// written and nothing is held, so the gauge of fleet faults waiting for a verdict
// stays at 0.
func (b *fleetBook) reportDryRun(fleets []decide.FleetFault) {
	current := make(map[string]bool, len(fleets))
	var raised []decide.FleetFault
	b.mu.Lock()
	for _, f := range fleets {
		name := nodefault.FleetName(v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}, f.Family)
		current[name] = true
		if _, seen := b.written[name]; !seen {
			b.written[name] = fleetWritten{members: len(f.Members)}
			raised = append(raised, f)
		}
	}
	for name := range b.written {
		if !current[name] {
			delete(b.written, name) // forgotten: raised again, reported again
		}
	}
	b.mu.Unlock()
	for _, f := range raised {
		name := nodefault.FleetName(v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}, f.Family)
		msg := fmt.Sprintf("dry-run: would raise fleet fault %s: %d nodes of %s hit pack %s (threshold %d): %s; their taints for the pack would be held for an operator's verdict",
			name, len(f.Members), f.Group, f.Family, f.Threshold, strings.Join(f.Members, ","))
		b.decisions.WithLabelValues("dry-run-fleet-fault", "ok", "").Inc()
		b.log.Warn("dry-run: fleet fault would be raised", "fleet", name, "group", f.Group.String(), "pack", f.Family, "members", f.Members)
		if b.pod == nil {
			continue
		}
		if err := b.actor.EventOn(b.pod, corev1.EventTypeNormal, reasonFleetFaultDryRun, msg); err != nil {
			b.log.Warn("event not recorded", "fleet", name, "err", err)
		}
	}
}

package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
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

// fleetWritten is what was last written to a fleet fault's record.
type fleetWritten struct {
	members int
	verdict decide.Verdict
}

// syncFleets writes the fleet faults the decider tracks to their NodeFault records
// (only those changed since the last write), posts an Event when one is raised,
// and sets the fleet fault gauge.
func (c *Controller) syncFleets(ctx context.Context) {
	fleets := c.decider.Fleets()
	if c.cfg.Decide.DryRun {
		c.reportDryRunFleets(fleets)
		return
	}
	c.m.fleetFaults.Reset()
	for _, f := range fleets {
		if f.Pending() {
			c.m.fleetFaults.WithLabelValues(f.Group.Label, f.Family).Inc()
		}
		g := v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}
		name := nodefault.FleetName(g, f.Family)
		w := fleetWritten{members: len(f.Members), verdict: f.Verdict}
		c.mu.Lock()
		last, seen := c.fleetRecords[name]
		c.mu.Unlock()
		if seen && last == w {
			continue
		}
		ch := nodefault.FleetChange{Group: g, Family: f.Family, Since: f.Since, Members: f.Members,
			Phase: v1alpha1.PhaseHeld, Reason: string(decide.ReasonFleet),
			Message: fmt.Sprintf("%d nodes of %s hit pack %s (threshold %d); their taints for the pack are held: release or dismiss it (POST /api/v1/fleet/%s/release or /dismiss)",
				len(f.Members), f.Group, f.Family, f.Threshold, name)}
		switch f.Verdict {
		case decide.VerdictReleased:
			ch.Phase, ch.Reason, ch.Decision = v1alpha1.PhaseResolved, string(f.Verdict), "release"
			ch.Message = "released by an operator: the members' faults go ahead as node faults, within the budgets"
		case decide.VerdictDismissed:
			ch.Phase, ch.Reason, ch.Decision = v1alpha1.PhaseResolved, string(f.Verdict), "dismiss"
			ch.Message = "dismissed by an operator: the shared part is blamed; the members' held faults are dropped without a taint"
		default:
			if !seen {
				ch.Decision = "hold-fleet"
			}
		}
		nf, raised, err := c.records.RecordFleet(ctx, ch)
		if err != nil {
			c.m.recordErrors.Inc()
			c.log.Warn("fleet fault record not written", "fleet", name, "err", err)
			continue
		}
		c.mu.Lock()
		if len(c.fleetRecords) > decide.MaxFleetGroups {
			c.fleetRecords = map[string]fleetWritten{}
		}
		c.fleetRecords[name] = w
		c.mu.Unlock()
		if raised {
			c.log.Warn("fleet fault raised", "fleet", name, "group", f.Group.String(), "pack", f.Family, "members", f.Members)
			if err := c.actor.EventOn(nf, corev1.EventTypeWarning, reasonFleetFault, ch.Message); err != nil {
				c.log.Warn("event not recorded", "fleet", name, "err", err)
			}
		}
	}
}

// fleetVerdict applies an operator's verdict (release or dismiss) to the pending
// fleet fault whose record is name, and saves it at once with the position, so
// that the next leader keeps it.
func (c *Controller) fleetVerdict(ctx context.Context, name string, v decide.Verdict) (int, string) {
	c.mu.Lock()
	pos := c.pos
	c.mu.Unlock()
	if pos == nil {
		return http.StatusServiceUnavailable, "this replica does not lead: ask the leader"
	}
	var target *decide.FleetFault
	for _, f := range c.decider.Fleets() {
		if f.Pending() && nodefault.FleetName(v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}, f.Family) == name {
			target = &f
			break
		}
	}
	if target == nil {
		return http.StatusNotFound, "no pending fleet fault " + name
	}
	switch v {
	case decide.VerdictReleased:
		if !c.decider.ReleaseFleet(target.Group, target.Family) {
			return http.StatusConflict, "fleet fault " + name + " got a verdict meanwhile"
		}
	case decide.VerdictDismissed:
		dropped, ok := c.decider.DismissFleet(target.Group, target.Family)
		if !ok {
			return http.StatusConflict, "fleet fault " + name + " got a verdict meanwhile"
		}
		for _, h := range dropped {
			f := h.Fault
			c.record(ctx, f.Node, f.Rule.Pack, f.Rule.ID, nodefault.Change{Phase: v1alpha1.PhaseResolved, Reason: string(v),
				Message: "dismissed with the fleet fault " + name + ": the shared part is blamed, not the node", Decision: "dismiss"})
		}
	default:
		return http.StatusBadRequest, "unknown verdict " + string(v)
	}
	c.log.Warn("fleet fault verdict by an operator", "fleet", name, "verdict", v, "members", strings.Join(target.Members, ","))
	c.savePosition(ctx, pos, true)
	c.syncFleets(ctx)
	c.kick() // released faults go ahead within the budgets
	return http.StatusOK, ""
}

// reportDryRunFleets reports the fleet faults dry-run would have raised, each once
// while it lasts: a log line, an Event on the controller's Pod (there is no record
// to post it on) and decisions{action="dry-run-fleet-fault"}. No record is
// written and nothing is held, so the gauge of fleet faults waiting for a verdict
// stays at 0.
func (c *Controller) reportDryRunFleets(fleets []decide.FleetFault) {
	current := make(map[string]bool, len(fleets))
	var raised []decide.FleetFault
	c.mu.Lock()
	for _, f := range fleets {
		name := nodefault.FleetName(v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}, f.Family)
		current[name] = true
		if _, seen := c.fleetRecords[name]; !seen {
			c.fleetRecords[name] = fleetWritten{members: len(f.Members)}
			raised = append(raised, f)
		}
	}
	for name := range c.fleetRecords {
		if !current[name] {
			delete(c.fleetRecords, name) // forgotten: raised again, reported again
		}
	}
	c.mu.Unlock()
	for _, f := range raised {
		name := nodefault.FleetName(v1alpha1.FleetGroup{Label: f.Group.Label, Value: f.Group.Value}, f.Family)
		msg := fmt.Sprintf("dry-run: would raise fleet fault %s: %d nodes of %s hit pack %s (threshold %d): %s; their taints for the pack would be held for an operator's verdict",
			name, len(f.Members), f.Group, f.Family, f.Threshold, strings.Join(f.Members, ","))
		c.m.decisions.WithLabelValues("dry-run-fleet-fault", "ok", "").Inc()
		c.log.Warn("dry-run: fleet fault would be raised", "fleet", name, "group", f.Group.String(), "pack", f.Family, "members", f.Members)
		if c.cfg.PodName == "" {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: c.cfg.PodName, Namespace: c.cfg.Namespace}}
		if err := c.actor.EventOn(pod, corev1.EventTypeNormal, reasonFleetFaultDryRun, msg); err != nil {
			c.log.Warn("event not recorded", "fleet", name, "err", err)
		}
	}
}

package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// reasonFleetFault is the reason of the Event posted on a fleet fault's record when
// it is raised.
const reasonFleetFault = "FleetFault"

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

package nodefault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/rules"
)

// MaxMembers bounds the member nodes a fleet fault's record lists.
const MaxMembers = 1024

// fleetRule stands for all the rules of the pack in a fleet fault's name.
const fleetRule = "*"

// FleetName is the name of the NodeFault of the fleet fault of group on the rules
// of pack family. It never equals a node fault's name: a node name holds no "=".
func FleetName(g v1alpha1.FleetGroup, family string) string {
	return Name(g.Label+"="+g.Value, family, fleetRule)
}

// FleetChange is one update of a fleet fault's record.
type FleetChange struct {
	Group  v1alpha1.FleetGroup
	Family string
	// Since is when the fleet fault was raised (the record's firstSeen).
	Since time.Time
	// Members replace the record's members (sorted, cut to MaxMembers).
	Members []string
	// Rules are the ids of the rules the members hit (spec.rule, joined by ","),
	// Severity the highest of their severities (spec.severity), Mode the mode they
	// acted in (status.mode): the row of the fleet fault reads as its members'.
	Rules    []string
	Severity string
	Mode     rules.Mode
	// Phase, Cause, Reason, Message and Decision as in Change.
	Phase    v1alpha1.Phase
	Cause    Cause
	Reason   string
	Message  string
	Decision string
}

// fleetRules is the spec.rule of a fleet fault of rules ids: the ids sorted and
// joined by ",", or "*" (the whole pack) when none is known.
func fleetRules(ids []string) string {
	if len(ids) == 0 {
		return fleetRule
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return Truncate(strings.Join(slices.Compact(ids), ","), maxMessage)
}

// RecordFleet applies c to the record of a fleet fault, creating it when there is
// none; raised says whether the record entered phase Held with this change (it was
// created, or it was in another phase).
func (s *Store) RecordFleet(ctx context.Context, c FleetChange) (nf *v1alpha1.NodeFault, raised bool, err error) {
	if c.Group.Label == "" || c.Group.Value == "" || c.Family == "" {
		return nil, false, fmt.Errorf("nodefault: fleet fault without a group or a family (%+v, %q)", c.Group, c.Family)
	}
	name := FleetName(c.Group, c.Family)
	created := false
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := s.Get(ctx, name)
		g := c.Group
		spec := v1alpha1.NodeFaultSpec{Scope: v1alpha1.ScopeFleet, Group: &g, Node: g.Label + "=" + g.Value,
			Pack: c.Family, Rule: fleetRules(c.Rules), Severity: c.Severity,
			Description: fmt.Sprintf("nodes of %s=%s hit the rules of pack %s together: the shared part is suspect", g.Label, g.Value, c.Family)}
		switch {
		case apierrors.IsNotFound(err):
			if err := s.refuse(ctx, name, PhaseNone, c.Phase, c.Cause); err != nil {
				return err // before the create: a refused write leaves no record
			}
			obj := &v1alpha1.NodeFault{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodeFault"},
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       spec,
			}
			var out v1alpha1.NodeFault
			if err := s.do(ctx, "POST", s.path(""), obj, &out); err != nil {
				return err
			}
			cur, created = &out, true
		case err != nil:
			return err
		case len(c.Rules) > 0 && (cur.Spec.Rule != spec.Rule || cur.Spec.Severity != spec.Severity):
			// The members hit another rule of the pack since: the row names it too.
			cur.Spec.Rule, cur.Spec.Severity = spec.Rule, spec.Severity
			var out v1alpha1.NodeFault
			if err := s.do(ctx, "PUT", s.path(name), cur, &out); err != nil {
				return err
			}
			cur = &out
		}
		if err := s.refuse(ctx, name, cur.Status.Phase, c.Phase, c.Cause); err != nil {
			return err
		}
		raised = c.Phase == v1alpha1.PhaseHeld && (created || cur.Status.Phase != v1alpha1.PhaseHeld)
		st := cur.Status.DeepCopy()
		s.apply(st, Change{Phase: c.Phase, Reason: c.Reason, Message: c.Message, Decision: c.Decision, Mode: c.Mode})
		if cur.Status.Phase == v1alpha1.PhaseResolved && st.Phase != v1alpha1.PhaseResolved {
			st.ResolvedAt = nil
		}
		m := slices.Clone(c.Members)
		slices.Sort(m)
		st.Members = m[:min(len(m), MaxMembers)]
		st.Count = int32(min(len(m), 1<<30))
		if !c.Since.IsZero() && st.FirstSeen == nil {
			t := metav1.NewTime(c.Since)
			st.FirstSeen = &t
		}
		now := metav1.NewTime(s.opts.Now())
		st.LastSeen = &now
		cur.Status = *st
		var updated v1alpha1.NodeFault
		if err := s.do(ctx, "PUT", s.path(name)+"/status", cur, &updated); err != nil {
			return err
		}
		nf = &updated
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("nodefault %s: %w", name, err)
	}
	return nf, raised, nil
}

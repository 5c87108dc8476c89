package act

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/rules"
)

// The taint bookkeeping lives in each fault's NodeFault record (status.taint), which
// only the controller's identity may write. The Node carries nothing faultline
// trusts: at most the pointer annotation fault.AnnotationFaults, for people.

// maxPointerBytes bounds the pointer annotation.
const maxPointerBytes = 4096

// claim is one fault asking for a taint on a node, as the taint planner sees it: its
// rule, the taint (key=value:effect), when it was last seen, and whether faultline
// owns the taint for it: placed, or placing (the Node update may have happened; see
// plan, which checks the Node).
type claim struct {
	pack, rule string
	taint      string
	seen       time.Time
	placed     bool
}

// id names the claim's rule as pack/rule.
func (c claim) id() string { return c.pack + "/" + c.rule }

// claimOf reads the claim of a record with a taint entry.
func claimOf(nf *v1alpha1.NodeFault) claim {
	c := claim{pack: nf.Spec.Pack, rule: nf.Spec.Rule, taint: nf.Spec.Taint, seen: nf.Status.Seen(), placed: nf.Status.OwnsTaint()}
	if t := nf.Status.Taint; t != nil {
		c.taint = t.Taint
	}
	return c
}

// recorded is a node's faults with a taint entry, as their records say, sorted by
// pack/rule.
type recorded struct {
	entries []claim
	states  map[string]v1alpha1.TaintRecord // pack/rule → the record's taint entry
	// objs are the records as last read or written (pack/rule →), so that a write
	// need not read its record again.
	objs map[string]*v1alpha1.NodeFault
}

func recordedOf(recs []*v1alpha1.NodeFault) recorded {
	r := recorded{states: map[string]v1alpha1.TaintRecord{}, objs: map[string]*v1alpha1.NodeFault{}}
	for _, nf := range recs {
		r.objs[nf.Spec.Pack+"/"+nf.Spec.Rule] = nf
		if nf.Status.Taint == nil {
			continue
		}
		c := claimOf(nf)
		r.entries = append(r.entries, c)
		r.states[c.id()] = *nf.Status.Taint
	}
	sort.Slice(r.entries, func(i, j int) bool { return r.entries[i].id() < r.entries[j].id() })
	return r
}

// readRecorded reads node's records, the ones a Node write is planned on: from the
// cache where it shows the Actor's own writes of them, from the API server when
// fresh (a retry after a conflict) or where it does not.
func (a *Actor) readRecorded(ctx context.Context, node string, fresh bool) (recorded, error) {
	l, err := a.records.ForNode(ctx, node, fresh)
	if err != nil {
		return recorded{}, err
	}
	recs := make([]*v1alpha1.NodeFault, len(l))
	for i := range l {
		recs[i] = &l[i]
	}
	return recordedOf(recs), nil
}

// writeTaint writes a fault's taint entry to its record (creating the record with
// the rule's spec when there is none).
func (a *Actor) writeTaint(ctx context.Context, node string, c claim, state v1alpha1.TaintState, r *rules.Compiled) error {
	_, err := a.records.Record(ctx, node, c.pack, c.rule, nodefault.Change{Rule: r,
		Taint: &v1alpha1.TaintRecord{Taint: c.taint, State: state}})
	return err
}

// writeRecord applies ch to the record of c, on the copy in old when there is one,
// and keeps the record as written there.
func (a *Actor) writeRecord(ctx context.Context, node string, old recorded, c claim, ch nodefault.Change) error {
	var (
		nf  *v1alpha1.NodeFault
		err error
	)
	switch known, listed := old.objs[c.id()]; {
	case known != nil:
		nf, err = a.records.RecordOn(ctx, known, ch)
	case old.objs != nil && !listed: // the node's records were just listed without it
		nf, err = a.records.RecordNew(ctx, node, c.pack, c.rule, ch)
	default:
		nf, err = a.records.Record(ctx, node, c.pack, c.rule, ch)
	}
	if err == nil && old.objs != nil {
		old.objs[c.id()] = nf
	}
	return err
}

// markPlacing writes Placing to the record of each fault the plan gives a taint it
// did not own: before the Node update, so that a crash after it leaves a record the
// next leader checks against the Node instead of a taint nobody owns.
func (a *Actor) markPlacing(ctx context.Context, node string, old recorded, p plan, firing *rules.Compiled) error {
	for _, c := range p.entries {
		if !c.placed {
			continue
		}
		if s, ok := old.states[c.id()]; ok && (s.State == v1alpha1.TaintPlaced || s.State == v1alpha1.TaintPlacing) && s.Taint == c.taint {
			continue
		}
		ch := nodefault.Change{Rule: ruleIf(firing, c), Taint: &v1alpha1.TaintRecord{Taint: c.taint, State: v1alpha1.TaintPlacing}}
		if err := a.writeRecord(ctx, node, old, c, ch); err != nil {
			return fmt.Errorf("record %s placing %s: %w", c.id(), c.taint, err)
		}
	}
	return nil
}

// settle writes, after the Node update, each fault's final taint entry (Placed or
// Existing) where it changed, and removes the entries of the cleared faults. A
// non-zero decision is applied to the firing fault's record in the same write.
func (a *Actor) settle(ctx context.Context, node string, old recorded, p plan, cleared []string, firing *rules.Compiled, decision nodefault.Change) error {
	var errs []string
	pending := !decision.IsZero() && firing != nil
	for _, c := range p.entries {
		want := v1alpha1.TaintExisting
		if c.placed {
			want = v1alpha1.TaintPlaced
		}
		ch := nodefault.Change{Rule: ruleIf(firing, c), Taint: &v1alpha1.TaintRecord{Taint: c.taint, State: want}}
		if s, ok := old.states[c.id()]; ok && s.State == want && s.Taint == c.taint {
			ch.Taint = nil // unchanged: its time stays
		}
		switch {
		case pending && ch.Rule != nil:
			ch = merged(decision, ch)
			pending = false
		case ch.Taint == nil:
			continue
		}
		if err := a.writeRecord(ctx, node, old, c, ch); err != nil {
			errs = append(errs, fmt.Sprintf("record %s %s: %v", c.id(), want, err))
		}
	}
	if pending { // the firing fault has no taint entry (its rule has no taint)
		if _, err := a.records.Record(ctx, node, firing.Pack, firing.ID, decision); err != nil {
			errs = append(errs, fmt.Sprintf("record %s: decision: %v", firing, err))
		}
	}
	for _, id := range cleared {
		pack, rule, _ := strings.Cut(id, "/")
		if _, err := a.records.Record(ctx, node, pack, rule, nodefault.Change{ClearTaint: true}); err != nil {
			errs = append(errs, fmt.Sprintf("record %s: clear taint: %v", id, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("node %s updated, its records not: %s", node, strings.Join(errs, "; "))
	}
	return nil
}

// merged is the decision's change with the taint entry of ch.
func merged(decision, ch nodefault.Change) nodefault.Change {
	decision.Taint = ch.Taint
	if decision.Rule == nil {
		decision.Rule = ch.Rule
	}
	return decision
}

func ruleIf(r *rules.Compiled, c claim) *rules.Compiled {
	if r != nil && r.Pack == c.pack && r.ID == c.rule {
		return r
	}
	return nil
}

// pointer is the value of the pointer annotation for the faults of entries: the
// names of their NodeFaults, comma-separated, cut to maxPointerBytes.
func pointer(node string, entries []claim) string {
	names := make([]string, 0, len(entries))
	for _, c := range entries {
		names = append(names, nodefault.Name(node, c.pack, c.rule))
	}
	sort.Strings(names)
	return nodefault.Truncate(strings.Join(names, ","), maxPointerBytes)
}

// CheckPlacing settles the records a writer left in Placing (a crash between the
// record and the Node update, or after it) against the Node: a node that carries
// the taint's key and effect has it adopted (Placed); otherwise the entry is removed,
// since that Node update never happened. Only records in Placing for at least
// minAge are checked, so a write in progress is not raced. It returns the pack/rule
// of each entry it settled, by outcome.
func (a *Actor) CheckPlacing(ctx context.Context, minAge time.Duration) (adopted, cleared []string, err error) {
	if err := a.ready(); err != nil {
		return nil, nil, err
	}
	now := a.opts.Now()
	var errs []error
	for _, nf := range a.ownedFaults() {
		st := nf.Status.Taint
		if st == nil || st.State != v1alpha1.TaintPlacing || now.Sub(st.Time.Time) < minAge {
			continue
		}
		node, c := nf.Spec.Node, claimOf(nf)
		n, err := a.readNode(ctx, node, true)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		t, ok := parseTaint(st.Taint)
		if err == nil && ok && findTaint(n.Spec.Taints, t.Key, t.Effect) != nil {
			if err := a.writeTaint(ctx, node, c, v1alpha1.TaintPlaced, nil); err != nil {
				errs = append(errs, err)
				continue
			}
			adopted = append(adopted, fault.Key(node, c.pack, c.rule))
			continue
		}
		if _, err := a.records.Record(ctx, node, c.pack, c.rule, nodefault.Change{ClearTaint: true}); err != nil {
			errs = append(errs, err)
			continue
		}
		cleared = append(cleared, fault.Key(node, c.pack, c.rule))
	}
	return adopted, cleared, errors.Join(errs...)
}

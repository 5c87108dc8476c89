package act

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/checkpoint"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// placings is where a fence says Placing before its Node update: the leader's
// journal (Options.Journal), which many fences share one write of, or, without
// one or when it is full, each fault's record. Both mean the same to every reader:
// the Node update may have happened, so the taint is the fault's while the Node
// carries it.
type placings struct {
	j       *checkpoint.Journal // nil: on the records
	client  kubernetes.Interface
	records *nodefault.Store
	now     func() time.Time
}

// claim says Placing for cs in the journal; false when the caller must write them
// to the records instead.
func (pl placings) claim(ctx context.Context, node string, cs []claim) (bool, error) {
	if pl.j == nil || len(cs) == 0 {
		return false, nil
	}
	ps := make([]checkpoint.Placing, len(cs))
	for i, c := range cs {
		ps[i] = checkpoint.Placing{Node: node, Pack: c.pack, Rule: c.rule, Taint: c.taint, Time: pl.now()}
	}
	switch err := pl.j.Claim(ctx, ps...); {
	case errors.Is(err, checkpoint.ErrJournalFull):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// release ends node's claims of the rules ids (pack/rule): their records say now.
func (pl placings) release(node string, ids []string) {
	if pl.j != nil {
		pl.j.Release(node, ids...)
	}
}

// abandon hands node's claims of ids to CheckPlacing: the placement that made them
// ended without its books.
func (pl placings) abandon(node string, ids []string) {
	if pl.j != nil {
		pl.j.Abandon(node, ids...)
	}
}

// overlay adds node's journal claims to r, as Placing entries: a claim the record
// already says Placed or Placing for, with the same taint, changes nothing.
func (pl placings) overlay(r *recorded, node string) {
	if pl.j == nil {
		return
	}
	ps := pl.j.Of(node)
	if len(ps) == 0 {
		return
	}
	for _, p := range ps {
		id := p.ID()
		if s, ok := r.states[id]; ok && s.Taint == p.Taint && (s.State == v1alpha1.TaintPlaced || s.State == v1alpha1.TaintPlacing) {
			continue
		}
		r.states[id] = v1alpha1.TaintRecord{Taint: p.Taint, State: v1alpha1.TaintPlacing, Time: metav1.NewTime(p.Time)}
		i := slices.IndexFunc(r.entries, func(c claim) bool { return c.id() == id })
		if i < 0 {
			r.entries = append(r.entries, claim{pack: p.Pack, rule: p.Rule, seen: p.Time})
			i = len(r.entries) - 1
		}
		r.entries[i].taint, r.entries[i].placed = p.Taint, true
	}
	sort.Slice(r.entries, func(i, j int) bool { return r.entries[i].id() < r.entries[j].id() })
}

// placingKey is the facts index's key of a journal claim: never an informer's.
func placingKey(p checkpoint.Placing) string { return "\x00placing/" + p.Node + "/" + p.ID() }

// setPlacing indexes a journal claim as the record it stands for until the books.
func (x *FactIndex) setPlacing(p checkpoint.Placing, held bool) {
	if !held {
		x.setRecord(placingKey(p), nil)
		return
	}
	x.setRecord(placingKey(p), &v1alpha1.NodeFault{
		Spec:   v1alpha1.NodeFaultSpec{Node: p.Node, Pack: p.Pack, Rule: p.Rule},
		Status: v1alpha1.NodeFaultStatus{Taint: &v1alpha1.TaintRecord{Taint: p.Taint, State: v1alpha1.TaintPlacing}},
	})
}

// check is CheckPlacing for the journal's claims at least minAge old: one
// whose record says its taint already is released; one whose Node carries the
// taint's key and effect is adopted (its record written Placed); the rest, whose
// Node update never happened, released. The releases are written at the end.
func (pl placings) check(ctx context.Context, minAge time.Duration) (adopted, cleared []string, err error) {
	if pl.j == nil {
		return nil, nil, nil
	}
	now := pl.now()
	var errs []error
	for _, p := range pl.j.Left() {
		if now.Sub(p.Time) < minAge {
			continue
		}
		recs, err := pl.records.ForNode(ctx, p.Node, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done := slices.ContainsFunc(recs, func(nf v1alpha1.NodeFault) bool {
			st := nf.Status.Taint
			return nf.Spec.Pack == p.Pack && nf.Spec.Rule == p.Rule && st != nil && st.Taint == p.Taint &&
				(st.State == v1alpha1.TaintPlaced || st.State == v1alpha1.TaintPlacing)
		})
		if done {
			pl.release(p.Node, []string{p.ID()})
			continue
		}
		n, err := pl.client.CoreV1().Nodes().Get(ctx, p.Node, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		if err == nil && hasTaintOf(n, p.Taint) {
			if _, err := pl.records.Record(ctx, p.Node, p.Pack, p.Rule, nodefault.Change{
				Taint: &v1alpha1.TaintRecord{Taint: p.Taint, State: v1alpha1.TaintPlaced}}); err != nil {
				errs = append(errs, err)
				continue
			}
			adopted = append(adopted, fault.Key(p.Node, p.Pack, p.Rule))
		} else {
			cleared = append(cleared, fault.Key(p.Node, p.Pack, p.Rule))
		}
		pl.release(p.Node, []string{p.ID()})
	}
	if err := pl.j.Flush(ctx); err != nil {
		errs = append(errs, err)
	}
	return adopted, cleared, errors.Join(errs...)
}

// hasTaintOf reports whether n carries the taint (key and effect) of a record entry.
func hasTaintOf(n *corev1.Node, taint string) bool {
	t, ok := parseTaint(taint)
	return ok && findTaint(n.Spec.Taints, t.Key, t.Effect) != nil
}

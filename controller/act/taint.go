package act

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// AllRules, given to Untaint as the rule, clears every fault of the node.
const AllRules = "*"

// Result tells what TaintNode or UntaintNode did.
type Result struct {
	Node string
	// Rule is the fault's pack/rule (Taint) or the rule argument (Untaint).
	Rule string
	// Changed: the Node was updated.
	Changed bool
	// Added and Removed list the taints faultline added or removed, as key=value:effect.
	Added, Removed []string
	// Existing is set by Taint when the node already had a taint with the rule's key
	// and effect that faultline did not place for this fault (kept as it is).
	Existing string
	// NewFault: Taint recorded a fault the node had no entry for, or one whose books
	// (and Events) a stopped leader never wrote.
	NewFault bool
	// Cleared lists the pack/rule of the entries Untaint removed.
	Cleared []string
	// Condition: the node condition was changed.
	Condition bool
	// Attempts counts the writes tried (more than 1 after conflicts).
	Attempts int
}

// TaintNode places the fault's taint on f.Node and records it in the fault's
// NodeFault (status.taint).
//
//   - Idempotent: an identical taint is not added again, and an unchanged record is
//     not written: a repeated call writes nothing.
//   - A taint with the same key and effect but another value is left as it is; the
//     record says Existing (Result.Existing says so).
//   - A node labelled fault.LabelOptOut=true is not changed; the error matches
//     ErrOptedOut (an *OptedOutError) and a FaultOptedOut Event is recorded.
//   - A conflicting write is retried with the Node read again from the API.
//   - Ownership comes from the records only: the record says Placing before the
//     Node update that adds the taint and Placed after it.
//
// A FaultTainted Event is recorded when a taint was added or the fault is new on
// the node.
func (a *Actor) TaintNode(ctx context.Context, f fault.Fault, bootID string) (Result, error) {
	pt, err := a.PlaceTaint(ctx, f, bootID, nodefault.Change{}, nil)
	if err != nil {
		return pt.Result(), err
	}
	return pt.Settle(ctx)
}

// Placement is a taint placed (or found) on its Node whose bookkeeping is not
// written yet: Settle writes it.
type Placement struct {
	a        *Actor
	f        fault.Fault
	decision nodefault.Change
	firing   claim
	res      Result
	last     *corev1.Node // the node as last read or written
	old      recorded
	p        plan
}

// Result is what the placement did so far.
func (pt *Placement) Result() Result {
	if pt == nil {
		return Result{}
	}
	return pt.res
}

// PlaceTaint does the part of TaintNode that fences the node: the fault's record
// says Placing, then the Node gets the taint. Settle writes the rest, and with it
// decision (the decision's phase, mode, history and evidence) in the same status
// write as the taint entry's Placed: the record never says Placed without the
// decision's phase. A zero decision writes only the taint entry. Until Settle,
// every reader takes the record's Placing as owning the taint, as after a crash
// between the two (see CheckPlacing).
//
// admit, when not nil, is asked before anything is written whenever the Node as
// read carries no taint of the rule's key and effect, that is when this call would
// fence the node anew: a decision made on a view that still showed the taint (or
// whose budget was freed since) must not add it without the budget. Its error ends
// the call, nothing written.
func (a *Actor) PlaceTaint(ctx context.Context, f fault.Fault, bootID string, decision nodefault.Change, admit func() error) (*Placement, error) {
	if f.Rule == nil {
		return nil, errors.New("act: fault without a rule")
	}
	if err := a.ready(); err != nil {
		return nil, err
	}
	defer a.fence(f.Node)()
	want := corev1.Taint{Key: f.Rule.Taint.Key, Value: f.Rule.Taint.Value, Effect: corev1.TaintEffect(f.Rule.Taint.Effect)}
	pt := &Placement{a: a, f: f, decision: decision,
		firing: claim{pack: f.Rule.Pack, rule: f.Rule.ID, taint: taintString(want), seen: f.Time}}
	id := pt.firing.id()

	var before map[string]v1alpha1.TaintRecord // the records' taint entries when this call began
	err := retry.RetryOnConflict(a.opts.Backoff, func() error {
		pt.res = Result{Node: f.Node, Rule: id, Attempts: pt.res.Attempts + 1}
		// The records first: the Node is read last, just before its update.
		var err error
		if pt.old, err = a.readRecorded(ctx, f.Node, pt.res.Attempts > 1); err != nil {
			return err
		}
		if before == nil {
			before = pt.old.states
		} else {
			pt.old.entries = withoutOwnPlacing(pt.old.entries, pt.old.states, before)
		}
		n, err := a.readNode(ctx, f.Node, pt.res.Attempts > 1)
		if err != nil {
			return err
		}
		pt.last = n
		if OptedOut(n) {
			return &OptedOutError{Node: f.Node, Rule: id}
		}
		if admit != nil && findTaint(n.Spec.Taints, want.Key, want.Effect) == nil {
			if err := admit(); err != nil {
				return err
			}
		}
		entries := make([]claim, 0, len(pt.old.entries)+1)
		for _, c := range pt.old.entries {
			if c.id() != id {
				entries = append(entries, c)
			}
		}
		entries = append(entries, pt.firing)
		// Placing: the books, which post the fault's Events, were never written (a
		// leader stopped between the fence and them); the fault is new to the Events.
		// An untaint that moved a shared taint to this fault and failed before its
		// books leaves Placing too: then one FaultTainted too many, never one missing.
		s, known := pt.old.states[id]
		pt.res.NewFault = !known || s.State == v1alpha1.TaintPlacing
		pt.p = a.plan(n, pt.old.entries, entries, id)
		pt.res.Added, pt.res.Removed, pt.res.Changed = pt.p.added, pt.p.removed, pt.p.changed
		for _, c := range pt.p.entries {
			if c.id() == id && !c.placed {
				if t := findTaint(pt.p.node.Spec.Taints, want.Key, want.Effect); t != nil {
					pt.res.Existing = taintString(*t)
				}
			}
		}
		if err := a.markPlacing(ctx, f.Node, pt.old, pt.p, f.Rule); err != nil {
			return err
		}
		if !pt.p.changed {
			return nil
		}
		if a.beforeWrite != nil {
			a.beforeWrite(f.Node, pt.res.Attempts)
		}
		u, err := a.writer.patch(ctx, n, pt.p.node)
		if err != nil {
			return err
		}
		pt.last = u
		return nil
	})
	var oo *OptedOutError
	switch {
	case errors.As(err, &oo):
		msg := fmt.Sprintf("rule %s fired (%s), not applied: node is labelled %s=true", id, f.Rule.Severity, fault.LabelOptOut)
		a.eventOnNode(pt.last, f.Rule.String(), string(f.Rule.Severity), ReasonOptedOut, msg)
		a.eventOnFault(ctx, f.Node, f.Rule.Pack, f.Rule.ID, string(f.Rule.Severity), ReasonOptedOut, msg)
		return pt, err
	case err != nil:
		return pt, fmt.Errorf("taint node %s for %s: %w", f.Node, id, err)
	}
	// A burst's placements wait for Settle: each keeps only what Settle reads of its
	// Node (its identity for the Events, faultline's condition), not the copies.
	pt.p.node, pt.last = nil, slimNode(pt.last)
	return pt, nil
}

// slimNode is n's identity and faultline's condition, all that Settle reads of it.
func slimNode(n *corev1.Node) *corev1.Node {
	if n == nil {
		return nil
	}
	s := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
	for _, c := range n.Status.Conditions {
		if c.Type == fault.ConditionType {
			s.Status.Conditions = append(s.Status.Conditions, c)
		}
	}
	return s
}

// Settle writes what PlaceTaint left: each fault's final taint entry with the
// decision, the node condition, and the FaultTainted Events (when a taint was added
// or the fault is new on the node). Call it once, before the node's next change.
func (pt *Placement) Settle(ctx context.Context) (Result, error) {
	a, f, res := pt.a, pt.f, pt.res
	id := pt.firing.id()
	if err := a.settle(ctx, f.Node, pt.old, pt.p, nil, f.Rule, pt.decision); err != nil {
		return res, fmt.Errorf("taint node %s for %s: %w", f.Node, id, err)
	}
	if a.opts.Condition {
		changed, err := a.syncCondition(ctx, pt.last, pt.p.entries, id)
		res.Condition = changed
		if err != nil {
			return res, fmt.Errorf("node %s: condition %s: %w", f.Node, fault.ConditionType, err)
		}
	}
	if len(res.Added) > 0 || res.NewFault {
		msg := describeTaint(res, f, pt.firing.taint, nodefault.Name(f.Node, f.Rule.Pack, f.Rule.ID))
		a.eventOnNode(pt.last, id, string(f.Rule.Severity), ReasonTainted, msg)
		a.eventOnFault(ctx, f.Node, f.Rule.Pack, f.Rule.ID, string(f.Rule.Severity), ReasonTainted, msg)
	}
	return res, nil
}

// describeTaint says what TaintNode did for fault f, whose rule asks for taint.
func describeTaint(res Result, f fault.Fault, taint, record string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %s (%s, %d match", f.Rule.Pack+"/"+f.Rule.ID, f.Rule.Severity, f.Count)
	if f.Count != 1 {
		b.WriteString("es")
	}
	b.WriteString("): ")
	switch {
	case len(res.Added) > 0:
		fmt.Fprintf(&b, "added taint %s", strings.Join(res.Added, ", "))
	case res.Existing != "":
		fmt.Fprintf(&b, "taint %s already present, kept as it is", res.Existing)
	default:
		fmt.Fprintf(&b, "taint %s already present", taint)
	}
	fmt.Fprintf(&b, "; evidence in NodeFault %s", record)
	if res.Condition {
		fmt.Fprintf(&b, "; set condition %s", fault.ConditionType)
	}
	if n := len(f.Evidence); n > 0 {
		fmt.Fprintf(&b, "; last line: %s", f.Evidence[n-1].Text)
	}
	return b.String()
}

// Untaint clears faults of a node: rule is a pack/rule, a rule id, or AllRules. See
// UntaintNode.
func (a *Actor) Untaint(ctx context.Context, node, rule string) error {
	_, err := a.UntaintNode(ctx, node, rule)
	return err
}

// UntaintNode clears the faults rule names from the node's records and removes the
// taints faultline placed for them. A taint that another remaining fault also asks
// for stays (it then names that fault's value, and that fault's record owns it);
// taints faultline did not place are never removed. A node without a matching fault
// is left alone (Result.Cleared is empty). A FaultUntainted Event reports what was
// cleared.
func (a *Actor) UntaintNode(ctx context.Context, node, rule string) (Result, error) {
	if rule == "" {
		return Result{}, errors.New("act: untaint: no rule (use AllRules to clear every fault)")
	}
	if err := a.ready(); err != nil {
		return Result{}, err
	}
	matches := func(c claim) bool {
		return rule == AllRules || rule == c.id() || rule == c.rule
	}
	var (
		res  Result
		last *corev1.Node
		old  recorded
		p    plan
	)
	err := retry.RetryOnConflict(a.opts.Backoff, func() error {
		res = Result{Node: node, Rule: rule, Attempts: res.Attempts + 1}
		var err error
		// Removing taints is rare and undoes what the records say faultline owns:
		// planned on the records as the API server has them.
		if old, err = a.readRecorded(ctx, node, true); err != nil {
			return err
		}
		n, err := a.readNode(ctx, node, res.Attempts > 1)
		if err != nil {
			return err
		}
		last = n
		var entries []claim
		for _, c := range old.entries {
			if matches(c) {
				res.Cleared = append(res.Cleared, c.id())
				continue
			}
			entries = append(entries, c)
		}
		if len(res.Cleared) == 0 {
			p = plan{entries: old.entries}
			return nil
		}
		p = a.plan(n, old.entries, entries, "")
		res.Added, res.Removed, res.Changed = p.added, p.removed, p.changed
		if err := a.markPlacing(ctx, node, old, p, nil); err != nil {
			return err
		}
		if !p.changed {
			return nil
		}
		if a.beforeWrite != nil {
			a.beforeWrite(node, res.Attempts)
		}
		u, err := a.writer.patch(ctx, n, p.node)
		if err != nil {
			return err
		}
		last = u
		return nil
	})
	if err == nil && len(res.Cleared) > 0 {
		err = a.settle(ctx, node, old, p, res.Cleared, nil, nodefault.Change{})
	}
	if err != nil {
		return res, fmt.Errorf("untaint node %s (%s): %w", node, rule, err)
	}
	if a.opts.Condition {
		changed, err := a.syncCondition(ctx, last, p.entries, "")
		res.Condition = changed
		if err != nil {
			return res, fmt.Errorf("node %s: condition %s: %w", node, fault.ConditionType, err)
		}
	}
	if len(res.Cleared) == 0 && !res.Condition {
		return res, nil
	}
	msg := describeUntaint(res)
	a.eventOnNode(last, strings.Join(res.Cleared, ","), "", ReasonUntainted, msg)
	for _, id := range res.Cleared {
		if pack, rule, ok := strings.Cut(id, "/"); ok {
			a.eventOnFault(ctx, node, pack, rule, "", ReasonUntainted, msg)
		}
	}
	return res, nil
}

// describeUntaint says what UntaintNode did.
func describeUntaint(res Result) string {
	var b strings.Builder
	if len(res.Cleared) > 0 {
		fmt.Fprintf(&b, "cleared %s", strings.Join(res.Cleared, ", "))
	} else {
		b.WriteString("no fault recorded")
	}
	if len(res.Removed) > 0 {
		fmt.Fprintf(&b, "; removed taint %s", strings.Join(res.Removed, ", "))
	}
	if len(res.Added) > 0 { // a shared taint now names a remaining fault
		fmt.Fprintf(&b, "; taint now %s", strings.Join(res.Added, ", "))
	}
	if res.Condition {
		fmt.Fprintf(&b, "; updated condition %s", fault.ConditionType)
	}
	return b.String()
}

// readNode returns a copy of the node to modify: from the cache on the first
// attempt, from the API after a conflict or while the cache has not yet shown the
// Actor's own last write of the node.
func (a *Actor) readNode(ctx context.Context, name string, fresh bool) (*corev1.Node, error) {
	if !fresh {
		n, err := a.cachedNode(ctx, name)
		if err != nil {
			return nil, err
		}
		if !a.cacheBehind(name, n.ResourceVersion) {
			return n, nil
		}
	}
	return a.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

type keyEffect struct {
	key    string
	effect corev1.TaintEffect
}

func taintString(t corev1.Taint) string { return t.Key + "=" + t.Value + ":" + string(t.Effect) }

// parseTaint reads key=value:effect (value may be empty).
func parseTaint(s string) (corev1.Taint, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return corev1.Taint{}, false
	}
	kv, eff := s[:i], s[i+1:]
	k, v, _ := strings.Cut(kv, "=")
	if k == "" || eff == "" {
		return corev1.Taint{}, false
	}
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(eff)}, true
}

func findTaint(ts []corev1.Taint, key string, effect corev1.TaintEffect) *corev1.Taint {
	for i := range ts {
		if ts[i].Key == key && ts[i].Effect == effect {
			return &ts[i]
		}
	}
	return nil
}

// withoutOwnPlacing un-claims the entries an earlier attempt of this call marked
// Placing before its Node update failed: that update placed nothing, so a taint of
// that key found now is somebody else's (a cache behind another client's write made
// the first attempt plan to add it). A Placing mark read at the start of the call is
// kept: it may stand for a write of a call that ended before it could settle.
func withoutOwnPlacing(entries []claim, states, before map[string]v1alpha1.TaintRecord) []claim {
	out := slices.Clone(entries)
	for i, c := range out {
		s := states[c.id()]
		if b, ok := before[c.id()]; c.placed && s.State == v1alpha1.TaintPlacing &&
			(!ok || b.Taint != s.Taint || (b.State != v1alpha1.TaintPlacing && b.State != v1alpha1.TaintPlaced)) {
			out[i].placed = false
		}
	}
	return out
}

type plan struct {
	node           *corev1.Node
	entries        []claim
	added, removed []string
	changed        bool
}

// plan computes the node's taints and pointer annotation for the new entries.
//
// Ownership: a taint (key+effect) is faultline's when the record of an old entry
// says Placed (or Placing: the Node update may have happened) for it and the node
// carries it. Each of faultline's taints is kept while some new entry asks for its
// key and effect (preferably its previous owner, then the firing fault, then the
// oldest entry), with that entry's value, and removed otherwise. The firing fault's
// taint is added when the node has none with its key and effect. Other taints are
// left exactly as they are, whatever the Node's annotations say.
func (a *Actor) plan(n *corev1.Node, old, entries []claim, firing string) plan {
	owners := map[keyEffect]string{} // key+effect -> pack/rule of the old owner
	for _, c := range old {
		if t, ok := parseTaint(c.taint); ok && c.placed {
			owners[keyEffect{t.Key, t.Effect}] = c.id()
		}
	}
	wants := func(i int) (corev1.Taint, bool) { return parseTaint(entries[i].taint) }
	for i := range entries {
		entries[i].placed = false
	}
	claim := func(ke keyEffect) int {
		best := -1
		for i := range entries {
			t, ok := wants(i)
			if !ok || t.Key != ke.key || t.Effect != ke.effect {
				continue
			}
			id := entries[i].id()
			switch {
			case id == owners[ke]:
				return i
			case best < 0, id == firing:
				best = i
			}
		}
		return best
	}
	var p plan
	taints := make([]corev1.Taint, 0, len(n.Spec.Taints)+1)
	for _, t := range n.Spec.Taints {
		ke := keyEffect{t.Key, t.Effect}
		if _, ours := owners[ke]; !ours {
			taints = append(taints, t)
			continue
		}
		i := claim(ke)
		if i < 0 {
			p.removed = append(p.removed, taintString(t))
			continue
		}
		w, _ := wants(i)
		if t.Value != w.Value {
			p.removed = append(p.removed, taintString(t))
			t.Value = w.Value
			p.added = append(p.added, taintString(t))
		}
		entries[i].placed = true
		taints = append(taints, t)
	}
	for i := range entries {
		if entries[i].id() != firing {
			continue
		}
		if w, ok := wants(i); ok && findTaint(taints, w.Key, w.Effect) == nil {
			taints = append(taints, w)
			p.added = append(p.added, taintString(w))
			entries[i].placed = true
		}
	}

	nn := n.DeepCopy()
	if len(p.added) > 0 || len(p.removed) > 0 {
		nn.Spec.Taints = taints
		p.changed = true
	}
	// The pointer for people; the legacy evidence annotation goes (never trusted).
	if _, had := nn.Annotations[fault.AnnotationLegacyEvidence]; had {
		delete(nn.Annotations, fault.AnnotationLegacyEvidence)
		p.changed = true
	}
	oldPtr, had := n.Annotations[fault.AnnotationFaults]
	if len(entries) == 0 {
		if had {
			delete(nn.Annotations, fault.AnnotationFaults)
			p.changed = true
		}
	} else if v := pointer(n.Name, entries); !had || v != oldPtr {
		if nn.Annotations == nil {
			nn.Annotations = map[string]string{}
		}
		nn.Annotations[fault.AnnotationFaults] = v
		p.changed = true
	}
	p.entries = entries
	p.node = nn
	return p
}

// syncCondition makes the node condition match the recorded faults: True with the
// reason of the firing rule (or of the newest fault) while there are any, False once
// there are none. It patches nodes/status only when the condition changes; a node
// that never had the condition and has no fault is left without one.
func (a *Actor) syncCondition(ctx context.Context, n *corev1.Node, entries []claim, firing string) (bool, error) {
	var cur *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == fault.ConditionType {
			cur = &n.Status.Conditions[i]
		}
	}
	want := corev1.NodeCondition{Type: fault.ConditionType, Status: corev1.ConditionFalse,
		Reason: "NoFault", Message: "faultline has no fault recorded on this node"}
	if len(entries) > 0 {
		newest := entries[0]
		ids := make([]string, len(entries))
		for i, c := range entries {
			ids[i] = c.id()
			if c.id() == firing || (newest.id() != firing && c.seen.After(newest.seen)) {
				newest = c
			}
		}
		want.Status = corev1.ConditionTrue
		want.Reason = newest.rule
		want.Message = nodefault.Truncate("faults: "+strings.Join(ids, ", "), messageLimit)
	}
	if cur == nil && want.Status == corev1.ConditionFalse {
		return false, nil
	}
	if cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
		return false, nil
	}
	now := metav1.NewTime(a.opts.Now())
	want.LastHeartbeatTime = now
	want.LastTransitionTime = now
	if cur != nil && cur.Status == want.Status {
		want.LastTransitionTime = cur.LastTransitionTime
	}
	if _, err := a.writer.setCondition(ctx, n.Name, want); err != nil {
		return false, err
	}
	return true, nil
}

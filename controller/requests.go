package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// errNotLeading: a request reached a replica that does not lead (it is left for
// the leader).
var errNotLeading = errors.New("this replica does not lead")

// answers holds the answers to requests carried out: until written, so that a failed
// write is tried again without carrying the request out a second time, and once
// written until the NodeFault cache shows them, so that a pass over a cache still
// behind the write does not carry the request out again (a second Resolve finds no
// taint left, and its answer would replace the first's).
type answers struct {
	mu sync.Mutex
	m  map[string]answerState // by NodeFault name
}

type answerState struct {
	status    v1alpha1.RequestStatus
	writtenAt time.Time // zero until written
}

// writtenTTL bounds how long a written answer is kept for a cache that has not shown
// it (the record may have been deleted since, and is then never seen again).
const writtenTTL = 10 * time.Minute

// take returns the answer to nf's request, if it was carried out, and whether the
// answer has been written.
func (a *answers) take(nf *v1alpha1.NodeFault) (ans v1alpha1.RequestStatus, written, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.m[nf.Name]
	r := nf.Spec.Request
	ok = ok && st.status.Action == r.Action && st.status.Time.Equal(&r.Time) && st.status.RequestedBy == r.RequestedBy
	return st.status, ok && !st.writtenAt.IsZero(), ok
}

func (a *answers) put(name string, ans v1alpha1.RequestStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]answerState{}
	}
	a.m[name] = answerState{status: ans}
}

func (a *answers) written(name string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, ok := a.m[name]; ok {
		st.writtenAt = now
		a.m[name] = st
	}
}

// shown forgets the answer to name's request: the cache shows the record answered.
func (a *answers) shown(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, name)
}

// expire forgets the answers written longer than writtenTTL ago.
func (a *answers) expire(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, st := range a.m {
		if !st.writtenAt.IsZero() && now.Sub(st.writtenAt) > writtenTTL {
			delete(a.m, name)
		}
	}
}

// requestDesk carries out the operators' requests on faults (NodeFault
// spec.request) on the leader, and answers each in status.request with who asked
// and what was done.
type requestDesk struct {
	faults  func() []*v1alpha1.NodeFault // the NodeFault cache
	records *nodefault.Store
	decider *decide.Decider
	fleet   *fleetBook
	rec     *recorder
	keep    *keeper
	// untaint removes a node's taints of a rule and resolves their records
	// (Controller.Untaint).
	untaint func(ctx context.Context, node, rule, why string) (act.Result, error)
	// positions are the term's read positions, nil when this replica does not lead.
	positions func() *positions
	kick      func()
	answers   answers
	requests  *prometheus.CounterVec
	errors    prometheus.Counter
	log       *slog.Logger
}

// answer carries out the requests that have no answer yet. A request that does not
// apply to its fault (Release on a node fault, Resolve on a fleet fault,
// ReleaseStorm on a rule no storm holds) is answered Refused; one that could not be
// carried out (an API error) is left unanswered and tried again at the next pass.
func (d *requestDesk) answer(ctx context.Context) {
	d.answers.expire(time.Now())
	for _, nf := range d.faults() {
		if !nf.Pending() {
			d.answers.shown(nf.Name)
			continue
		}
		ans, written, done := d.answers.take(nf)
		if written {
			continue // answered: the cache has not shown it yet
		}
		if !done {
			r := *nf.Spec.Request
			msg, err := d.carryOut(ctx, nf, r)
			result := v1alpha1.RequestDone
			var refused *refusal
			switch {
			case errors.As(err, &refused):
				result, msg = v1alpha1.RequestRefused, refused.why
			case err != nil:
				d.log.Warn("request on a fault not carried out; tried again", "fault", nf.Name, "action", r.Action, "by", r.RequestedBy, "err", err)
				continue
			}
			d.log.Warn("request on a fault answered", "fault", nf.Name, "action", r.Action, "by", r.RequestedBy, "reason", r.Reason,
				"result", result, "message", msg)
			d.requests.WithLabelValues(string(r.Action), result).Inc()
			ans = v1alpha1.RequestStatus{Request: r, Result: result, Message: msg, Done: metav1.NewTime(time.Now())}
			d.answers.put(nf.Name, ans)
		}
		if err := d.records.Answer(ctx, nf.Name, ans); err != nil {
			d.errors.Inc()
			d.log.Warn("answer to a request not written; tried again", "fault", nf.Name, "err", err)
			continue
		}
		d.answers.written(nf.Name, time.Now())
	}
}

// refusal is a request its fault does not allow.
type refusal struct{ why string }

func (r *refusal) Error() string { return r.why }

func refuse(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// carryOut does what r asks of nf and says what was done.
func (d *requestDesk) carryOut(ctx context.Context, nf *v1alpha1.NodeFault, r v1alpha1.Request) (string, error) {
	fleet := nf.Spec.Scope == v1alpha1.ScopeFleet
	by := "by request of " + r.RequestedBy
	if r.Reason != "" {
		by += ": " + r.Reason
	}
	switch r.Action {
	case v1alpha1.RequestResolve:
		if fleet {
			return "", refuse("a fleet fault is not resolved: ask for Release or Dismiss")
		}
		return d.resolve(ctx, nf, by)
	case v1alpha1.RequestRelease, v1alpha1.RequestDismiss:
		if !fleet {
			return "", refuse("%s is a fleet fault's verdict; %s is a node fault (ask for Resolve)", r.Action, nf.Name)
		}
		v := decide.VerdictReleased
		if r.Action == v1alpha1.RequestDismiss {
			v = decide.VerdictDismissed
		}
		err := d.verdict(ctx, func(ctx context.Context) error { return d.fleet.verdict(ctx, nf.Name, v) })
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("fleet fault %s %s %s", nf.Name, v, by), nil
	case v1alpha1.RequestReleaseStorm:
		key := nf.Spec.Pack + "/" + nf.Spec.Rule
		err := d.verdict(ctx, func(context.Context) error {
			if !d.decider.Storms().Release(key) {
				return refuse("rule %s is not held by a storm", key)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		return "storm of rule " + key + " released " + by, nil
	}
	return "", refuse("unknown action %q", r.Action)
}

// resolve removes a node fault's taint and resolves its record; a fault that holds
// no taint (held, observed, waiting) is taken out of the held queue and resolved.
func (d *requestDesk) resolve(ctx context.Context, nf *v1alpha1.NodeFault, by string) (string, error) {
	rule := nf.Spec.Pack + "/" + nf.Spec.Rule
	res, err := d.untaint(ctx, nf.Spec.Node, rule, "resolved "+by)
	if err != nil {
		return "", err
	}
	if len(res.Cleared) == 0 {
		d.decider.Forget(fault.Key(nf.Spec.Node, nf.Spec.Pack, nf.Spec.Rule))
		d.rec.resolved(ctx, nf.Spec.Node, []string{rule}, "resolved "+by)
	}
	if len(res.Removed) == 0 {
		return "resolved " + by + "; no taint was on the node", nil
	}
	return fmt.Sprintf("removed %s, resolved %s", strings.Join(res.Removed, ", "), by), nil
}

// verdict carries out an operator's verdict (a storm released, a fleet fault
// released or dismissed) on the leader, and saves it at once with the position, so
// that the next leader keeps it; held faults it frees go ahead within the budgets.
func (d *requestDesk) verdict(ctx context.Context, do func(context.Context) error) error {
	pos := d.positions()
	if pos == nil {
		return errNotLeading
	}
	if err := do(ctx); err != nil {
		return err
	}
	d.keep.save(ctx, pos, true)
	d.fleet.sync(ctx)
	d.kick()
	return nil
}

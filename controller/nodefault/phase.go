package nodefault

import (
	"context"
	"fmt"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// Cause is what moves a record from one phase to another. Every write that sets
// a phase names its cause, and the Store refuses a write whose (from, to, cause)
// is not in Transitions: each phase is entered for the reasons the table gives,
// and only for them (docs/lifecycle.md draws the same table).
type Cause string

// Causes of phase transitions.
const (
	// CauseAnnotate: a decision that records without acting (the rule in mode
	// annotate, or --dry-run).
	CauseAnnotate Cause = "annotate"
	// CauseHold: a brake holds the fault (budget, rule budget, storm, group budget,
	// opt-out, a pending fleet fault).
	CauseHold Cause = "hold"
	// CauseProbe: a confirming probe is asked for.
	CauseProbe Cause = "probe"
	// CauseAwaitIdle: the confirming probe's invasive checks wait for the node's
	// GPUs to be free (its harmless ones found nothing).
	CauseAwaitIdle Cause = "await-idle"
	// CauseTaint: the rule's taint is placed, or found on the node.
	CauseTaint Cause = "taint"
	// CauseRecover: the recovery probes start on a tainted node.
	CauseRecover Cause = "recover"
	// CauseRecoverFailed: the recovery probes did not pass; the taint stays.
	CauseRecoverFailed Cause = "recover-failed"
	// CauseProbePassed: the confirming probe passed: the fault is dismissed.
	CauseProbePassed Cause = "probe-passed"
	// CauseProbeTimedOut: the confirming probe reached no verdict and the rule's
	// onTimeout is not taint: the fault is dismissed.
	CauseProbeTimedOut Cause = "probe-timed-out"
	// CauseDismiss: an operator dismissed the fleet fault that held it.
	CauseDismiss Cause = "dismiss"
	// CauseUntaint: the record's taint was removed (recovered, or untainted by
	// request).
	CauseUntaint Cause = "untaint"
	// CauseRaise: a fleet fault's record is raised, or its members change.
	CauseRaise Cause = "raise"
	// CauseVerdict: an operator's verdict (release, dismiss) ends a fleet fault.
	CauseVerdict Cause = "verdict"
)

// PhaseNone is the phase of a record no write has given a phase yet (a record
// created to place a taint, or only to count a ladder's firing).
const PhaseNone v1alpha1.Phase = ""

// Transition is one allowed change of phase.
type Transition struct {
	From, To v1alpha1.Phase
	Cause    Cause
}

func (t Transition) String() string {
	from := string(t.From)
	if from == "" {
		from = "(none)"
	}
	return fmt.Sprintf("%s → %s (%s)", from, t.To, t.Cause)
}

var (
	observed   = v1alpha1.PhaseObserved
	held       = v1alpha1.PhaseHeld
	confirming = v1alpha1.PhaseConfirming
	awaiting   = v1alpha1.PhaseAwaitingIdle
	tainted    = v1alpha1.PhaseTainted
	recovering = v1alpha1.PhaseRecovering
	resolved   = v1alpha1.PhaseResolved
)

// Transitions are the allowed changes of phase, each with what causes it. A
// decision is made on each firing whatever the record says, so the phases a
// decision writes (Observed, Held, Confirming, Tainted) are reached from every
// phase but for these limits:
//
//   - Observed is entered only by a decision that does not act (annotate, dry-run):
//     a probe that passed dismisses the fault (Resolved), it does not observe it;
//   - AwaitingIdle is entered only from Confirming (and kept while the GPUs stay
//     held), left for Tainted (the invasive checks failed), Resolved (they passed,
//     reached no verdict, or an untaint) or for a decision on a new firing;
//   - Recovering is entered only from Tainted (and left for Tainted or Resolved);
//   - Resolved is entered only by an untaint, a probe that did not confirm the
//     fault, or an operator's dismissal or verdict;
//   - a fleet fault's record is Held (raised) or Resolved (a verdict).
//
// Tainted and Recovering go to Held, Confirming or Observed only when the rule
// fires again on a node whose taint was removed outside faultline (kubectl): an
// annotate decision on a node that still carries the taint leaves it Tainted.
var Transitions = []Transition{
	// A new record.
	{PhaseNone, observed, CauseAnnotate},
	{PhaseNone, held, CauseHold},
	{PhaseNone, held, CauseRaise},
	{PhaseNone, confirming, CauseProbe},
	{PhaseNone, tainted, CauseTaint},
	{PhaseNone, resolved, CauseUntaint}, // a taint adopted from an interrupted write, removed

	{observed, observed, CauseAnnotate},
	{observed, held, CauseHold}, // the rule raised to enforce
	{observed, confirming, CauseProbe},
	{observed, tainted, CauseTaint},
	{observed, resolved, CauseUntaint},

	{held, held, CauseHold},
	{held, held, CauseRaise},
	{held, observed, CauseAnnotate}, // the rule lowered to annotate while held
	{held, confirming, CauseProbe},  // released
	{held, tainted, CauseTaint},     // released
	{held, resolved, CauseProbePassed},
	{held, resolved, CauseProbeTimedOut},
	{held, resolved, CauseDismiss},
	{held, resolved, CauseVerdict},
	{held, resolved, CauseUntaint},

	{confirming, confirming, CauseProbe},
	{confirming, held, CauseHold}, // probe failed and a brake holds it; or a fleet fault raised meanwhile
	{confirming, tainted, CauseTaint},
	{confirming, observed, CauseAnnotate}, // the rule lowered to annotate while probing
	{confirming, resolved, CauseProbePassed},
	{confirming, resolved, CauseProbeTimedOut},
	{confirming, resolved, CauseDismiss}, // probe failed after the fleet fault was dismissed
	{confirming, resolved, CauseUntaint},
	{confirming, awaiting, CauseAwaitIdle}, // the GPUs are held: the invasive checks wait

	{awaiting, awaiting, CauseAwaitIdle}, // still held (by other pods, or fired again)
	{awaiting, tainted, CauseTaint},      // the invasive checks failed
	{awaiting, resolved, CauseProbePassed},
	{awaiting, resolved, CauseProbeTimedOut},
	{awaiting, resolved, CauseDismiss},
	{awaiting, resolved, CauseUntaint},
	{awaiting, confirming, CauseProbe},  // fired again (no unconfirmed taint)
	{awaiting, held, CauseHold},         // the invasive checks failed and a brake holds it
	{awaiting, observed, CauseAnnotate}, // the rule lowered to annotate

	{tainted, tainted, CauseTaint},
	{tainted, tainted, CauseRecoverFailed},
	{tainted, recovering, CauseRecover},
	{tainted, resolved, CauseUntaint},
	{tainted, held, CauseHold},         // the taint was removed outside faultline
	{tainted, confirming, CauseProbe},  // the taint was removed outside faultline
	{tainted, observed, CauseAnnotate}, // the taint was removed outside faultline

	{recovering, recovering, CauseRecover},
	{recovering, tainted, CauseRecoverFailed},
	{recovering, tainted, CauseTaint}, // fired again while its recovery probes ran
	{recovering, resolved, CauseUntaint},
	{recovering, held, CauseHold},
	{recovering, confirming, CauseProbe},
	{recovering, observed, CauseAnnotate},

	// Reopened: the rule fired again after the fault was over.
	{resolved, observed, CauseAnnotate},
	{resolved, held, CauseHold},
	{resolved, held, CauseRaise},
	{resolved, confirming, CauseProbe},
	{resolved, tainted, CauseTaint},
	{resolved, resolved, CauseUntaint},
	{resolved, resolved, CauseVerdict},
}

var allowed = func() map[Transition]bool {
	m := make(map[Transition]bool, len(Transitions))
	for _, t := range Transitions {
		m[t] = true
	}
	return m
}()

// TransitionError is a write refused because its change of phase is not in
// Transitions.
type TransitionError struct {
	Name string
	Transition
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("nodefault %s: phase transition %s is not allowed", e.Name, e.Transition)
}

// checkTransition returns a *TransitionError unless moving record name from
// phase from to phase to for cause is allowed. A write that sets no phase
// changes none and is always allowed.
func checkTransition(name string, from, to v1alpha1.Phase, cause Cause) error {
	if to == PhaseNone {
		return nil
	}
	t := Transition{From: from, To: to, Cause: cause}
	if allowed[t] {
		return nil
	}
	return &TransitionError{Name: name, Transition: t}
}

// refuse checks a write of record name from phase from to phase to for cause; a
// refused one is counted (Options.Refused), logged and returned wrapped.
func (s *Store) refuse(ctx context.Context, name string, from, to v1alpha1.Phase, cause Cause) error {
	err := checkTransition(name, from, to, cause)
	if err == nil {
		return nil
	}
	if s.opts.Refused != nil {
		s.opts.Refused.WithLabelValues(string(from), string(to), string(cause)).Inc()
	}
	s.opts.Log.WarnContext(ctx, "NodeFault write refused: phase transition not allowed", "nodefault", name,
		"from", from, "to", to, "cause", cause)
	return err
}

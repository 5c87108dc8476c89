// Package match is the controller's match-and-correlate stage: it runs each log
// line from Loki through the active rule engine and the correlator, and turns rule
// firings into Faults for the decide stage.
package match

import (
	"time"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/correlate"
)

// Stats count what the stage saw.
type Stats struct {
	Lines   uint64
	NoNode  uint64 // lines whose stream has no node label: counted and skipped
	Matches map[string]uint64
}

// Result is what one line produced.
type Result struct {
	// Matches: every rule that matched (fired or not), for metrics.
	Matches []correlate.Outcome
	// Faults: the firings to decide on.
	Faults []fault.Fault
	// Hit: a rule's pattern matched the line (a companion part too), so the
	// correlator may hold it; deciding the line again would count it twice.
	Hit bool
}

// Stage matches lines. It is not safe for concurrent use: the controller feeds it
// from one goroutine, in arrival order.
type Stage struct {
	engine    func() *rules.Engine
	corr      *correlate.Correlator
	hits      []rules.Hit
	outs      []correlate.Outcome
	lastPrune time.Time
	Stats     Stats
}

// New returns a stage reading the active engine through engine() on every line, so
// reloaded packs take effect at once.
func New(engine func() *rules.Engine) *Stage {
	return &Stage{engine: engine, corr: correlate.NewShared(), Stats: Stats{Matches: map[string]uint64{}}}
}

// Process handles one line.
func (s *Stage) Process(e logstream.Line) Result {
	s.Stats.Lines++
	if e.Node == "" {
		s.Stats.NoNode++
		return Result{}
	}
	eng := s.engine()
	s.hits = eng.Match(&e, s.hits[:0])
	s.outs = s.corr.Observe(correlate.Key{Node: e.Node, Stream: e.Stream}, e.Time, e.Text, s.hits, s.outs[:0])
	res := Result{Hit: len(s.hits) > 0}
	if len(s.outs) > 0 {
		res.Matches = append([]correlate.Outcome(nil), s.outs...)
	}
	for _, o := range s.outs {
		s.Stats.Matches[o.Rule.String()]++
		if !o.Fired {
			continue
		}
		// A second witness (an NVML event beside the kernel's line) fires the fault of
		// the rule it names: one fault, decided and recorded once.
		res.Faults = append(res.Faults, fault.Fault{Node: e.Node, Rule: o.Rule.FaultRule(), Captures: o.Captures, Count: o.Count,
			Time: e.Time, Evidence: withLabels(o.Evidence, e)})
	}
	// Forget windows nobody can complete any more, now and then.
	if e.Time.Sub(s.lastPrune) > time.Minute {
		s.corr.Prune(e.Time, max(minHorizon, eng.Set().Horizon()))
		s.lastPrune = e.Time
	}
	return res
}

// withLabels gives the firing line, the evidence's last, its labels and structured
// metadata, which the correlator does not keep: the escalation's reboots trigger
// reads the boot id the line was written in there.
func withLabels(ev []logstream.Line, e logstream.Line) []logstream.Line {
	n := len(ev)
	if n == 0 || len(e.Labels) == 0 || !ev[n-1].Time.Equal(e.Time) || ev[n-1].Text != e.Text {
		return ev
	}
	out := append([]logstream.Line(nil), ev...)
	out[n-1].Labels = e.Labels
	return out
}

// minHorizon keeps correlation state at least this long even when every rule looks
// back less (a reload may bring longer windows).
const minHorizon = 10 * time.Minute

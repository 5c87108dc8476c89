// Package match is the controller's match-and-correlate stage: it runs each log
// line from Loki through the active rule engine and the correlator, and turns rule
// firings into Faults for the decide stage.
package match

import (
	"time"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/correlate"
)

// Entry is one log line with its stream's identity.
type Entry struct {
	Node   string
	Source rules.Source // kernel or pod; empty when the stream does not say
	Stream string       // the stream's canonical label set
	Labels map[string]string
	Time   time.Time
	Line   string
}

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
	return &Stage{engine: engine, corr: correlate.New(), Stats: Stats{Matches: map[string]uint64{}}}
}

// Process handles one line.
func (s *Stage) Process(e Entry) Result {
	s.Stats.Lines++
	if e.Node == "" {
		s.Stats.NoNode++
		return Result{}
	}
	eng := s.engine()
	s.hits = eng.Match(rules.Line{Text: e.Line, Source: e.Source, Labels: e.Labels}, s.hits[:0])
	s.outs = s.corr.Observe(correlate.Key{Node: e.Node, Stream: e.Stream}, e.Time, e.Line, s.hits, s.outs[:0])
	var res Result
	if len(s.outs) > 0 {
		res.Matches = append([]correlate.Outcome(nil), s.outs...)
	}
	for _, o := range s.outs {
		s.Stats.Matches[o.Rule.String()]++
		if !o.Fired {
			continue
		}
		f := fault.Fault{Node: e.Node, Rule: o.Rule, Captures: o.Captures, Count: o.Count, Time: e.Time}
		for _, ev := range o.Evidence {
			f.Evidence = append(f.Evidence, fault.Line{Time: ev.Time, Text: ev.Text})
		}
		res.Faults = append(res.Faults, f)
	}
	// Forget windows nobody can complete any more, now and then.
	if e.Time.Sub(s.lastPrune) > time.Minute {
		s.corr.Prune(e.Time, max(minHorizon, eng.Set().Horizon()))
		s.lastPrune = e.Time
	}
	return res
}

// minHorizon keeps correlation state at least this long even when every rule looks
// back less (a reload may bring longer windows).
const minHorizon = 10 * time.Minute

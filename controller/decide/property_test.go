package decide_test

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

// sim plays a caller against a Decider: it applies the taints it is told to, removes
// taints at random, and sees the cluster through facts that lag behind by up to a
// minute (an informer cache), never going backwards.
type sim struct {
	t       *testing.T
	rng     *rand.Rand
	clk     *clock
	d       *decide.Decider
	n       int
	optOut  map[string]bool
	real    map[string]map[string]bool // node -> rule keys: the cluster as it is
	snaps   []snap                     // the cluster after each change
	seen    int                        // newest snapshot the caller has seen
	budget  int
	ruleCap map[string]int
	applied int
}

type snap struct {
	at      time.Time
	tainted map[string][]string
}

func (s *sim) record() {
	m := map[string][]string{}
	for n, keys := range s.real {
		m[n] = slices.Sorted(maps.Keys(keys))
	}
	s.snaps = append(s.snaps, snap{at: s.clk.Now(), tainted: m})
}

func (s *sim) facts() decide.NodeFacts {
	lag := time.Duration(s.rng.IntN(61)) * time.Second
	idx := s.seen
	for i := len(s.snaps) - 1; i > s.seen; i-- {
		if !s.snaps[i].at.After(s.clk.Now().Add(-lag)) {
			idx = i
			break
		}
	}
	s.seen = idx
	return decide.NodeFacts{Eligible: s.n, Tainted: s.snaps[idx].tainted, OptedOut: s.optOut}
}

func (s *sim) apply(dec decide.Decision) {
	s.t.Helper()
	if dec.Kind != decide.KindTaint {
		return
	}
	f := dec.Fault
	if s.optOut[f.Node] {
		s.t.Fatalf("taint of opted-out node %s", f.Node)
	}
	if s.real[f.Node] == nil {
		s.real[f.Node] = map[string]bool{}
	}
	s.real[f.Node][f.Rule.String()] = true
	s.applied++
	if traceSim {
		s.t.Logf("%s APPLY %s real=%v", s.clk.Now().Format("15:04:05"), dec, slices.Sorted(maps.Keys(s.real)))
	}
	s.record()
	if len(s.real) > s.budget {
		s.t.Fatalf("%d nodes tainted, budget %d (%s)", len(s.real), s.budget, dec)
	}
	for key, lim := range s.ruleCap {
		c := 0
		for _, keys := range s.real {
			if keys[key] {
				c++
			}
		}
		if c > lim {
			s.t.Fatalf("%d nodes carry %s, rule budget %d", c, key, lim)
		}
	}
}

// TestBudgetNeverExceededRandom: under random fault sequences, untaints, releases
// and a lagging view of the cluster, the nodes faultline taints never exceed the
// global budget nor any rule budget.
func TestBudgetNeverExceededRandom(t *testing.T) {
	rs := []*rules.Compiled{
		rule("t1", rules.ActionTaint), rule("t2", rules.ActionTaint), rule("t3", rules.ActionTaint),
		rule("p1", rules.ActionProbe), rule("e1", rules.ActionEvent),
	}
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	total := 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		clk := newClock()
		n := 1 + rng.IntN(40)
		cfg := decide.Config{
			MaxNodes:     rng.IntN(6),
			MaxPercent:   []float64{1, 5, 10, 25, 50, 100}[rng.IntN(6)],
			DisableStorm: rng.IntN(2) == 0,
			StormShare:   []float64{0.1, 0.2, 0.5}[rng.IntN(3)],
			StormWindow:  time.Duration(1+rng.IntN(10)) * time.Minute,
			MaxHeld:      1 + rng.IntN(30),
			RuleBudgets:  map[string]int{},
		}
		for _, r := range rs[:4] {
			if rng.IntN(3) == 0 {
				cfg.RuleBudgets[r.String()] = rng.IntN(4)
			}
		}
		d := newDecider(t, cfg, clk)
		s := &sim{t: t, rng: rng, clk: clk, d: d, n: n, optOut: map[string]bool{},
			real: map[string]map[string]bool{}, budget: d.Config().Budget(n), ruleCap: cfg.RuleBudgets}
		for i := range n {
			if rng.IntN(10) == 0 {
				s.optOut[node(i)] = true
			}
		}
		s.record()
		probe := func(f fault.Fault) {
			r := rng.IntN(3)
			s.apply(d.DecideProbe(f, decide.ProbeResult{Outcome: decide.OutcomeOf(r == 0, r == 1)}, s.facts()))
		}
		for range 400 {
			clk.Add(time.Duration(rng.IntN(20)) * time.Second)
			switch op := rng.IntN(10); {
			case op <= 5:
				f := flt(node(rng.IntN(n)), rs[rng.IntN(len(rs))])
				dec := d.Decide(f, s.facts())
				s.apply(dec)
				if dec.Kind == decide.KindProbe {
					probe(f)
				}
			case op <= 7:
				if len(s.real) == 0 {
					continue
				}
				victim := slices.Sorted(maps.Keys(s.real))[rng.IntN(len(s.real))]
				delete(s.real, victim)
				if traceSim {
					t.Logf("%s UNTAINT %s", clk.Now().Format("15:04:05"), victim)
				}
				s.record()
				if rng.IntN(2) == 0 {
					d.Taints().Untainted(victim)
				}
			case op == 8:
				for _, dec := range d.Release(s.facts()) {
					s.apply(dec)
					if dec.Kind == decide.KindProbe {
						probe(dec.Fault)
					}
				}
			default:
				clk.Add(time.Duration(rng.IntN(180)) * time.Second)
			}
			if h := len(d.Held()); h > cfg.MaxHeld {
				t.Fatalf("seed %d: %d held, MaxHeld %d", seed, h, cfg.MaxHeld)
			}
		}
		total += s.applied
	}
	if total == 0 {
		t.Fatal("no taint was ever applied: the simulation tests nothing")
	}
	t.Logf("%d taints applied over %d random runs", total, seeds)
}

// traceSim logs the simulated caller's actions (for debugging a failing seed).
const traceSim = false

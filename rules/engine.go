package rules

import (
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/faultline-dev/faultline/logstream"
)

// Hit is one rule matching one line: its primary regex (with captures), or, when
// Companion is set, the regex of its companion number Part (an index into
// Rule.Companions) of a multi-line rule. Captures is read only; it is nil when the
// regex captured nothing (most hits are benign companion lines, matched on many
// lines, and a correlator keeps the waiting ones: no map is made for them).
type Hit struct {
	Rule      *Compiled
	Captures  map[string]string
	Companion bool
	Part      int
}

// Engine matches lines against a compiled Set. Most lines of a fleet are benign, so
// it first scans each line once for every rule's required literals (ASCII
// case-insensitive, see gramFilter) and runs the regexes of the candidate rules
// only. The result is the same as running every regex on every line (see
// MatchNaive). An Engine is safe for concurrent use.
type Engine struct {
	set      *Set
	pre      *gramFilter
	patterns []string
	// targets[i] lists, for pattern i, the rules it makes candidates of.
	targets [][]target
	// always lists targets without usable literals: checked on every line.
	always []target
	// musts[i]: literal sets rule i's primary regex needs, checked before running
	// it (see requiredLiteralSets), as indexes in sets.
	musts []setRefs
	// sets are the distinct literal sets of every rule and companion: the rules of
	// one message family share sets (": sxid (pci:" of the five SXid rules), and a
	// line checks each set once (scratch.setDone).
	sets []litSet
	// implied[i]: the sets of pattern i's targets that it implies (it contains one
	// of their literals): a line the prefilter found it in holds them.
	implied [][]int32
	// first[i]: for a primary regex anchored at the text's start, the bytes its
	// match can start with (see firstBytes); nil otherwise.
	first []*byteSet
	// companions[i][j]: what the engine checks of companion j of rule i.
	companions [][]companionCheck
	// compBase[i]: the index of rule i's first companion among all companions.
	compBase []int32
	// nearExprs counts the distinct expressions of companions searched near their
	// literals (companionCheck.nearID).
	nearExprs int
	groups    map[string]int
	group     []int // rule index -> exclusive group number, -1 for none
	words     int
	pool      sync.Pool
}

// companionCheck is what the engine knows of one companion regex.
type companionCheck struct {
	// musts: literal sets the regex needs, checked before running it.
	musts setRefs
	// near: the engine may search from just before the first of the companion's
	// literals, where the prefilter found it (see matchesNear).
	near bool
	// nearID numbers the distinct expressions of near companions: rules that
	// share a companion line ("link status definitely up") run its regex once.
	nearID int
	// finite: the strings a near companion's regex matches, when it is a few
	// literals (see finiteStrings): it matches where the line holds one of them.
	finite []string
}

// target is what a prefilter pattern makes a candidate of: rule's primary regex
// (part 0) or the regex of its companion part-1.
type target struct {
	rule int32
	part int32
}

type scratch struct {
	primary   []uint64
	companion []uint64 // rules with some companion marked
	parts     []uint64 // by rule: the companions marked (bit j: companion j)
	// at: by companion (compBase), where the first of its literals starts in the
	// line; -1 when none was found.
	at       []int32
	nearDone []nearResult // by nearID
	nearSeen []int32      // the nearIDs of nearDone to clear
	// setDone: by index in Engine.sets, whether the line holds a literal of the
	// set, once checked; setSeen: the indexes to clear.
	setDone   []nearResult
	setSeen   []int32
	groupDone []bool
}

// nearResult is what a check said of the line, if it ran: a near companion's
// regex, or a literal set (whether the line holds one of its literals).
type nearResult uint8

const (
	nearUnknown nearResult = iota
	nearNo
	nearYes
)

// CompileEngine compiles packs as Compile does and builds their matcher.
func CompileEngine(packs []*Pack) (*Engine, error) {
	set, err := Compile(packs)
	if err != nil {
		return nil, err
	}
	return NewEngine(set), nil
}

// NewEngine builds the matcher for a compiled set.
func NewEngine(set *Set) *Engine {
	e := &Engine{set: set, groups: map[string]int{}}
	e.group = make([]int, len(set.Rules))
	patIndex := map[string]int{}
	add := func(lits []string, t target) {
		if lits == nil {
			e.always = append(e.always, t)
			return
		}
		for _, l := range lits {
			key := lower(l)
			i, ok := patIndex[key]
			if !ok {
				i = len(e.patterns)
				patIndex[key] = i
				e.patterns = append(e.patterns, key)
				e.targets = append(e.targets, nil)
			}
			e.targets[i] = append(e.targets[i], t)
		}
	}
	e.musts = make([]setRefs, len(set.Rules))
	setIDs := map[string]int32{}
	refs := func(sets [][]string) setRefs {
		var out setRefs
		for _, set := range sets {
			key := strings.Join(set, "\x00")
			id, ok := setIDs[key]
			if !ok {
				id = int32(len(e.sets))
				setIDs[key] = id
				e.sets = append(e.sets, compileSet(set))
			}
			out = append(out, id)
		}
		return out
	}
	e.first = make([]*byteSet, len(set.Rules))
	e.companions = make([][]companionCheck, len(set.Rules))
	e.compBase = make([]int32, len(set.Rules))
	nearIDs := map[string]int{}
	comps := 0
	for i, r := range set.Rules {
		e.compBase[i] = int32(comps)
		comps += len(r.Companions)
		if !r.regex.startAnchored { // an anchored regex fails at once: sets cost more
			e.musts[i] = refs(without(r.regex.sets, r.Literals))
		} else {
			e.first[i] = firstBytes(r.regex.expr)
		}
		add(r.Literals, target{rule: int32(i)})
		for j, cp := range r.Companions {
			cre := cp.regex
			cc := companionCheck{musts: refs(without(cre.sets, cp.Literals))}
			if !slices.ContainsFunc(cre.names, func(n string) bool { return n != "" }) && !cre.anchored && len(cp.Literals) > 0 {
				id, ok := nearIDs[cre.expr]
				if !ok {
					id = len(nearIDs)
					nearIDs[cre.expr] = id
				}
				cc.near, cc.nearID, cc.finite = true, id, finiteStrings(cre.expr)
			}
			e.companions[i] = append(e.companions[i], cc)
			add(cp.Literals, target{rule: int32(i), part: int32(j + 1)})
		}
		e.group[i] = -1
		if r.Exclusive != "" {
			g, ok := e.groups[r.Exclusive]
			if !ok {
				g = len(e.groups)
				e.groups[r.Exclusive] = g
			}
			e.group[i] = g
		}
	}
	e.implied = make([][]int32, len(e.patterns))
	for p, ts := range e.targets {
		for _, t := range ts {
			refs := e.musts[t.rule]
			if t.part > 0 {
				refs = e.companions[t.rule][t.part-1].musts
			}
			for _, id := range refs {
				if !slices.Contains(e.implied[p], id) && implies([]string{e.patterns[p]}, e.sets[id].lits) {
					e.implied[p] = append(e.implied[p], id)
				}
			}
		}
	}
	e.pre = newGramFilter(e.patterns)
	e.nearExprs = len(nearIDs)
	e.words = (len(set.Rules) + 63) / 64
	e.pool.New = func() any {
		s := &scratch{
			primary:   make([]uint64, e.words),
			companion: make([]uint64, e.words),
			parts:     make([]uint64, len(set.Rules)),
			at:        make([]int32, comps),
			nearDone:  make([]nearResult, e.nearExprs),
			setDone:   make([]nearResult, len(e.sets)),
			groupDone: make([]bool, len(e.groups)),
		}
		for k := range s.at {
			s.at[k] = -1
		}
		return s
	}
	return e
}

// without drops the sets that a line holds whenever it is a candidate and holds
// the other sets: a line the prefilter passes holds one of lits, so a set each of
// whose literals contains a member of is held already ({"nvrm:"} when every literal
// starts "nvrm: "); and a set another set implies is held when that one is ({"err",
// "time"} beside {"error", "timeout"}). Of sets that imply each other, the first
// stays.
func without(sets [][]string, lits []string) [][]string {
	low := make([]string, len(lits))
	for i, l := range lits {
		low[i] = lower(l)
	}
	var out [][]string // not in place: sets are the Compiled rule's, kept for the next engine
	for _, set := range sets {
		if len(low) == 0 || !implies(low, set) {
			out = append(out, set)
		}
	}
	kept := out[:0:0]
	for i, set := range out {
		if !slices.ContainsFunc(out[:i], func(o []string) bool { return implies(o, set) }) &&
			!slices.ContainsFunc(out[i+1:], func(o []string) bool { return implies(o, set) && !implies(set, o) }) {
			kept = append(kept, set)
		}
	}
	return kept
}

// implies reports whether a line that holds one of the lower-case literals of a
// holds one of set's: each of a's contains one of set's.
func implies(a, set []string) bool {
	for _, l := range a {
		if !slices.ContainsFunc(set, func(m string) bool { return strings.Contains(l, m) }) {
			return false
		}
	}
	return true
}

// Set returns the compiled rules the engine matches.
func (e *Engine) Set() *Set { return e.set }

// Patterns returns the literals the prefilter scans for (lower-cased), and whether
// every rule has some: if not, some regex runs on every line.
func (e *Engine) Patterns() ([]string, bool) { return e.patterns, len(e.always) == 0 }

// Match appends to dst the hits of line l and returns the extended slice. Of the
// line it reads the text, the source (empty means unknown, and rules of every source
// apply) and the labels (for rules' label matchers).
func (e *Engine) Match(l *logstream.Line, dst []Hit) []Hit { return e.match(l, dst, nil) }

// Matcher matches lines as its Engine does, from one goroutine, with scratch space
// of its own: taking it from the Engine's pool and putting it back is a visible cost
// on the lines with candidate rules, a quarter of a kernel log's.
type Matcher struct {
	e *Engine
	s *scratch
}

// Matcher returns a Matcher of e, for one goroutine.
func (e *Engine) Matcher() *Matcher { return &Matcher{e: e, s: e.pool.New().(*scratch)} }

// Match is Engine.Match.
func (m *Matcher) Match(l *logstream.Line, dst []Hit) []Hit { return m.e.match(l, dst, m.s) }

// match is Match with the scratch own, or, when own is nil, one from the pool.
func (e *Engine) match(l *logstream.Line, dst []Hit, own *scratch) []Hit {
	if len(e.always) == 0 && len(l.Text) < minLiteralLen {
		return dst
	}
	// Benign lines take no scratch from the pool: it is fetched at the first mark.
	s := own
	for _, t := range e.always {
		if s == nil {
			s = e.pool.Get().(*scratch)
		}
		s.mark(t, -1, e.compBase)
	}
	marked := len(e.always) > 0
	if len(e.patterns) > 0 && len(l.Text) >= minLiteralLen {
		e.pre.find(l.Text, func(p int32, at int) {
			if s == nil {
				s = e.pool.Get().(*scratch)
			}
			marked = true
			for _, t := range e.targets[p] {
				s.mark(t, at, e.compBase)
			}
			for _, id := range e.implied[p] {
				if s.setDone[id] == nearUnknown {
					s.setDone[id] = nearYes
					s.setSeen = append(s.setSeen, id)
				}
			}
		})
	}
	if !marked {
		return dst
	}
	if own == nil {
		defer e.pool.Put(s)
	}
	for w := 0; w < e.words; w++ {
		p, c := s.primary[w], s.companion[w]
		if p == 0 && c == 0 {
			continue
		}
		for set := p | c; set != 0; set &= set - 1 { // the marked rules, in order
			bit := bits.TrailingZeros64(set)
			m := uint64(1) << bit
			i := w*64 + bit
			var parts uint64
			if c&m != 0 {
				parts, s.parts[i] = s.parts[i], 0
			}
			dst = e.eval(i, l, p&m != 0, parts, s, dst)
			for ; parts != 0; parts &= parts - 1 {
				s.at[int(e.compBase[i])+bits.TrailingZeros64(parts)] = -1
			}
		}
		s.primary[w], s.companion[w] = 0, 0
	}
	s.reset()
	return dst
}

// mark records target t, one of whose literals the line holds from byte at on (-1:
// unknown); compBase is the engine's.
func (s *scratch) mark(t target, at int, compBase []int32) {
	w, m := t.rule/64, uint64(1)<<(t.rule%64)
	if t.part > 0 {
		s.companion[w] |= m
		s.parts[t.rule] |= 1 << (t.part - 1)
		if k := compBase[t.rule] + t.part - 1; at >= 0 && (s.at[k] < 0 || int32(at) < s.at[k]) {
			s.at[k] = int32(at)
		}
	} else {
		s.primary[w] |= m
	}
}

// reset clears what one line left in s besides the marks Match clears as it goes.
func (s *scratch) reset() {
	for g := range s.groupDone {
		s.groupDone[g] = false
	}
	for _, id := range s.nearSeen {
		s.nearDone[id] = nearUnknown
	}
	s.nearSeen = s.nearSeen[:0]
	for _, id := range s.setSeen {
		s.setDone[id] = nearUnknown
	}
	s.setSeen = s.setSeen[:0]
}

// eval runs rule i's regexes on the line (its primary regex when primary is set,
// the companions whose bits parts has), in rule order, honouring exclusive groups.
// It reads s's exclusive groups, where the companions' literals start, and the
// results of near companions' regexes that ran on the line already.
func (e *Engine) eval(i int, l *logstream.Line, primary bool, parts uint64, s *scratch, dst []Hit) []Hit {
	r := e.set.Rules[i]
	if !r.accepts(l) {
		return dst
	}
	if primary {
		g := e.group[i]
		if (g < 0 || !s.groupDone[g]) && e.startsRight(i, l.Text) && e.holds(e.musts[i], l.Text, s) {
			if caps, ok := r.matchPrimary(l.Text); ok {
				dst = append(dst, Hit{Rule: r, Captures: caps})
				if g >= 0 {
					s.groupDone[g] = true
				}
			}
		}
	}
	for ; parts != 0; parts &= parts - 1 {
		j := bits.TrailingZeros64(parts)
		if j >= len(r.Companions) {
			break
		}
		cc := &e.companions[i][j]
		if !e.holds(cc.musts, l.Text, s) {
			continue
		}
		re := r.Companions[j].Regexp()
		if cc.near {
			// No captures to report: whether it matches is all the hit needs.
			res := s.nearDone[cc.nearID]
			if res == nearUnknown {
				res = nearNo
				if cc.finite != nil && containsAny(l.Text, cc.finite) ||
					cc.finite == nil && matchesNear(re, l.Text, int(s.at[int(e.compBase[i])+j])) {
					res = nearYes
				}
				s.nearDone[cc.nearID] = res
				s.nearSeen = append(s.nearSeen, int32(cc.nearID))
			}
			if res == nearYes {
				dst = append(dst, Hit{Rule: r, Companion: true, Part: j})
			}
		} else if m := re.FindStringSubmatchIndex(l.Text); m != nil {
			dst = append(dst, Hit{Rule: r, Captures: captures(re, l.Text, m), Companion: true, Part: j})
		}
	}
	return dst
}

// startsRight reports whether text may start a match of rule i's primary regex.
func (e *Engine) startsRight(i int, text string) bool {
	f := e.first[i]
	return f == nil || len(text) > 0 && f.has(text[0])
}

// accepts checks the source and label matchers.
func (r *Compiled) accepts(l *logstream.Line) bool {
	if r.Source != SourceAny && l.Source != "" && l.Source != string(r.Source) {
		return false
	}
	for _, lm := range r.labels {
		if !lm.re.MatchString(l.Labels[lm.name]) {
			return false
		}
	}
	return true
}

func (r *Compiled) matchPrimary(text string) (map[string]string, bool) {
	re := r.Regexp()
	m := re.FindStringSubmatchIndex(text)
	if m == nil {
		return nil, false
	}
	for i := range r.where {
		cd := &r.where[i]
		a, b := m[2*cd.capture], m[2*cd.capture+1]
		v := ""
		if a >= 0 {
			v = text[a:b]
		}
		if !cd.holds(v) {
			return nil, false
		}
	}
	var caps map[string]string // nil when nothing is captured (see Hit)
	for i, n := range re.SubexpNames() {
		if n != "" && m[2*i] >= 0 {
			if caps == nil {
				caps = map[string]string{}
			}
			caps[n] = text[m[2*i]:m[2*i+1]]
		}
	}
	return caps, true
}

// captures returns the named groups that took part in the match m of text.
func captures(re interface{ SubexpNames() []string }, text string, m []int) map[string]string {
	var caps map[string]string // nil when nothing is captured (see Hit)
	for i, n := range re.SubexpNames() {
		if n != "" && m[2*i] >= 0 && m[2*i+1] > m[2*i] {
			if caps == nil {
				caps = map[string]string{}
			}
			caps[n] = text[m[2*i]:m[2*i+1]]
		}
	}
	return caps
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

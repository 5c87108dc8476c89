package rules

import (
	"fmt"
	"regexp"
	"time"
)

// DefaultTaintKey is the taint key used when neither the rule nor its pack sets one.
const DefaultTaintKey = "faultline.io/faulty"

// Compiled is a rule ready to match: defaults applied, overrides merged, regexes compiled.
type Compiled struct {
	Index       int
	ID          string
	Pack        string
	File        string
	Line        int
	Description string
	Source      Source
	Severity    Severity
	Action      Action
	// Mode is the rule's adoption stage: its own, else its pack's, else enforce.
	// The controller may lower it further (a ceiling); see Mode.
	Mode Mode
	// Escalate is the rule's escalation ladder, in order (see Step).
	Escalate  []Step
	Exclusive string
	Taint     Taint
	Probe     Probe
	Threshold Threshold
	Cooldown  time.Duration
	Recover   Recover
	Tests     []RuleTest
	// Sources and BenignSources are the rule's provenance (see SourceRef).
	Sources       []SourceRef
	BenignSources []SourceRef
	// SameFaultAs is the id of the rule whose fault this rule's firings are (see
	// Rule.SameFaultAs); faultOf is that rule while the set holds it.
	SameFaultAs string
	faultOf     *Compiled

	// Companions are the other lines of a multi-line group, in the order the rule
	// lists them; nil for a one-line rule.
	Companions []*CompiledCompanion
	// Literals: every match contains one of these (ASCII case-insensitively); nil
	// when none of minLiteralLen bytes was found and the regex runs on every line.
	Literals []string
	// regex is match.regex (see Regexp).
	regex *regex

	labels []labelMatcher
	where  []condition
}

// CompiledCompanion is a compiled Companion.
type CompiledCompanion struct {
	Position string
	Lines    int
	Duration time.Duration
	Literals []string
	regex    *regex
}

// Regexp returns the companion's regex, compiled on first use.
func (c *CompiledCompanion) Regexp() *regexp.Regexp { return c.regex.compiled() }

type labelMatcher struct {
	name string
	re   *regexp.Regexp
}

type condition struct {
	name    string
	in      []string
	notIn   []string
	min     *float64
	max     *float64
	capture int // index in the primary regex's submatches
}

// Set is the merged, compiled result of loading packs in order.
type Set struct {
	Packs []*Pack
	Rules []*Compiled // enabled rules, in load order
	// Disabled lists the ids of rules that a pack disabled.
	Disabled []string
}

// Compile merges packs in order and compiles their enabled rules. A later pack's rule
// with an id already loaded replaces that rule in place; if it has no `match`, it
// patches only the fields it sets (for example `enabled: false` or a new `action`).
func Compile(packs []*Pack) (*Set, error) {
	type entry struct {
		r    Rule
		pack *Pack
	}
	var order []string
	byID := map[string]*entry{}
	var errs Errors
	for _, p := range packs {
		for _, r := range p.Spec.Rules {
			prev, exists := byID[r.ID]
			if r.Match == nil {
				if !exists {
					errs = append(errs, &Error{File: p.File, Line: r.Line, Pack: p.Metadata.Name, Rule: r.ID,
						Msg: "rule has no match and overrides no earlier rule"})
					continue
				}
				patch(&prev.r, r)
				continue
			}
			full := applyDefaults(r, p.Spec.Defaults)
			if exists {
				prev.r, prev.pack = full, p
				continue
			}
			byID[r.ID] = &entry{r: full, pack: p}
			order = append(order, r.ID)
		}
	}
	set := &Set{Packs: packs}
	parsed := map[string]*regex{} // rules that share a regex parse it once
	for _, id := range order {
		e := byID[id]
		if e.r.Enabled != nil && !*e.r.Enabled {
			set.Disabled = append(set.Disabled, id)
			continue
		}
		c, err := compileRule(e.r, e.pack, parsed)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.Index = len(set.Rules)
		set.Rules = append(set.Rules, c)
	}
	errs = append(errs, resolveSameFault(set.Rules)...)
	return set, errs.errorOrNil()
}

// resolveSameFault points each second witness at the rule whose fault it joins. A
// missing or disabled target leaves the rule standing alone (an operator may drop
// the kernel pack and keep NVML's); a chain of witnesses is refused, since the
// fault a firing joins must not depend on which rules a reload kept.
func resolveSameFault(rs []*Compiled) Errors {
	byID := make(map[string]*Compiled, len(rs))
	for _, r := range rs {
		byID[r.ID] = r
	}
	var errs Errors
	for _, r := range rs {
		t := byID[r.SameFaultAs]
		if r.SameFaultAs == "" || t == nil {
			continue
		}
		if t.SameFaultAs != "" {
			errs = append(errs, &Error{File: r.File, Line: r.Line, Pack: r.Pack, Rule: r.ID,
				Msg: fmt.Sprintf("sameFaultAs %q: that rule is itself a witness of %q; name the rule that owns the fault", t.ID, t.SameFaultAs)})
			continue
		}
		r.faultOf = t
	}
	return errs
}

// FaultRule is the rule whose fault a firing of r is: the rule named by its
// sameFaultAs while the set holds it, else r itself. The controller records, decides
// and acts on a firing as a firing of this rule.
func (c *Compiled) FaultRule() *Compiled {
	if c.faultOf != nil {
		return c.faultOf
	}
	return c
}

// patch copies the fields an override sets onto the rule it overrides.
func patch(dst *Rule, p Rule) {
	if p.Description != "" {
		dst.Description = p.Description
	}
	if p.SameFaultAs != "" {
		dst.SameFaultAs = p.SameFaultAs
	}
	if p.Enabled != nil {
		dst.Enabled = p.Enabled
	}
	if p.Source != "" {
		dst.Source = p.Source
	}
	if p.Labels != nil {
		dst.Labels = p.Labels
	}
	if p.Exclusive != "" {
		dst.Exclusive = p.Exclusive
	}
	if p.Severity != "" {
		dst.Severity = p.Severity
	}
	if p.Action != "" {
		dst.Action = p.Action
		// A ladder climbs from a taint: an override that makes the rule stop
		// tainting and names no ladder of its own takes the inherited one away.
		if p.Escalate == nil && p.Action != ActionTaint && p.Action != ActionProbe {
			dst.Escalate = nil
		}
	}
	if p.Taint != nil {
		dst.Taint = p.Taint
	}
	if p.Probe != nil {
		dst.Probe = p.Probe
	}
	if p.Threshold != nil {
		dst.Threshold = p.Threshold
	}
	if p.Cooldown != 0 {
		dst.Cooldown = p.Cooldown
	}
	if p.Recover != nil {
		dst.Recover = p.Recover
	}
	if p.Mode != "" {
		dst.Mode = p.Mode
	}
	if p.Escalate != nil {
		dst.Escalate = p.Escalate
	}
	if p.Tests != nil {
		dst.Tests = p.Tests
	}
	if p.Sources != nil {
		dst.Sources = p.Sources
	}
	if p.BenignSources != nil {
		dst.BenignSources = p.BenignSources
	}
}

func applyDefaults(r Rule, d Defaults) Rule {
	if r.Source == "" {
		r.Source = d.Source
	}
	if r.Labels == nil {
		r.Labels = d.Labels
	}
	if r.Severity == "" {
		r.Severity = d.Severity
	}
	if r.Action == "" {
		r.Action = d.Action
	}
	if r.Taint == nil {
		r.Taint = d.Taint
	}
	if r.Probe == nil {
		r.Probe = d.Probe
	}
	if r.Recover == nil {
		r.Recover = d.Recover
	}
	if r.Cooldown == 0 {
		r.Cooldown = d.Cooldown
	}
	if r.Mode == "" {
		r.Mode = d.Mode
	}
	return r
}

func compileRule(r Rule, p *Pack, parsed map[string]*regex) (*Compiled, *Error) {
	fail := func(format string, args ...any) *Error {
		return &Error{File: p.File, Line: r.Line, Pack: p.Metadata.Name, Rule: r.ID, Msg: fmt.Sprintf(format, args...)}
	}
	c := &Compiled{
		ID: r.ID, Pack: p.Metadata.Name, File: p.File, Line: r.Line, Description: r.Description,
		Source: r.Source, Severity: r.Severity, Action: r.Action, Exclusive: r.Exclusive,
		Cooldown: r.Cooldown.D(), Tests: r.Tests, Sources: r.Sources, BenignSources: r.BenignSources,
		SameFaultAs: r.SameFaultAs, Mode: r.Mode, Escalate: r.Escalate,
	}
	if c.Mode == "" {
		c.Mode = ModeEnforce
	}
	if c.Source == "" {
		c.Source = SourceAny
	}
	if c.Severity == "" {
		return nil, fail("severity is not set (in the rule or the pack defaults)")
	}
	if c.Action == "" {
		return nil, fail("action is not set (in the rule or the pack defaults)")
	}
	if r.Taint != nil {
		c.Taint = *r.Taint
	}
	if c.Taint.Key == "" {
		c.Taint.Key = DefaultTaintKey
	}
	if c.Taint.Value == "" {
		c.Taint.Value = r.ID
	}
	if c.Taint.Effect == "" {
		c.Taint.Effect = "NoSchedule"
	}
	if r.Probe != nil {
		c.Probe = *r.Probe
	}
	if c.Probe.OnTimeout == "" {
		c.Probe.OnTimeout = "ignore"
	}
	if c.Probe.WhileBusy == "" {
		c.Probe.WhileBusy = WhileBusyTaintUnconfirmed
	}
	if c.Action == ActionProbe && len(c.Probe.Checks) == 0 {
		return nil, fail("action probe needs probe.checks")
	}
	if msg := ladderError(c); msg != "" {
		return nil, fail("%s", msg)
	}
	c.Threshold = Threshold{Count: 1}
	if r.Threshold != nil {
		c.Threshold = *r.Threshold
	}
	switch {
	case r.Recover != nil:
		c.Recover = *r.Recover
	default:
		// Critical faults stay until a human clears them; lesser ones too unless the
		// pack says otherwise, because an automatic untaint needs a stated reason.
		c.Recover = Recover{Manual: true}
	}
	var err error
	if c.regex, err = parsedRegex(parsed, r.re, r.Match.Regex); err != nil {
		return nil, fail("match.regex: %v", err)
	}
	c.Literals = c.regex.literals
	names := map[string]int{}
	for i, n := range c.regex.names {
		if n != "" {
			names[n] = i
		}
	}
	for i, cp := range r.Match.CompanionList() {
		cc := &CompiledCompanion{Position: cp.Position, Lines: cp.Within.Lines, Duration: cp.Within.Duration.D()}
		if cc.Position == "" {
			cc.Position = "either"
		}
		var pre *regex
		if i < len(r.companionRes) {
			pre = r.companionRes[i]
		}
		if cc.regex, err = parsedRegex(parsed, pre, cp.Regex); err != nil {
			return nil, fail("%s.regex: %v", companionField(*r.Match, i), err)
		}
		cc.Literals = cc.regex.literals
		c.Companions = append(c.Companions, cc)
	}
	for name, w := range r.Match.Where {
		idx, ok := names[name]
		if !ok {
			return nil, fail("where: %q is not a named capture of match.regex", name)
		}
		c.where = append(c.where, condition{name: name, in: w.In, notIn: w.NotIn, min: w.Min, max: w.Max, capture: idx})
	}
	for k, v := range r.Labels {
		re, err := regexp.Compile("^(?:" + v + ")$")
		if err != nil {
			return nil, fail("labels.%s: %v", k, err)
		}
		c.labels = append(c.labels, labelMatcher{name: k, re: re})
	}
	return c, nil
}

// parsedRegex returns the regex of expr: the one validation parsed, one parsed
// before for another rule, or a new one.
func parsedRegex(cache map[string]*regex, validated *regex, expr string) (*regex, error) {
	if re, ok := cache[expr]; ok {
		return re, nil
	}
	re := validated
	if re == nil || re.expr != expr {
		var err error
		if re, err = parseRegex(expr); err != nil {
			return nil, err
		}
	}
	cache[expr] = re
	return re, nil
}

// Regexp returns the rule's match.regex, compiled on first use; nil for a rule
// that has none (a Compiled not made by compiling a pack).
func (c *Compiled) Regexp() *regexp.Regexp {
	if c.regex == nil {
		return nil
	}
	return c.regex.compiled()
}

// holds evaluates one condition on a captured value.
func (cd *condition) holds(v string) bool {
	if len(cd.in) > 0 && !inList(v, cd.in) {
		return false
	}
	if len(cd.notIn) > 0 && inList(v, cd.notIn) {
		return false
	}
	if cd.min != nil || cd.max != nil {
		f, ok := numeric(v)
		if !ok {
			return false
		}
		if cd.min != nil && f < *cd.min {
			return false
		}
		if cd.max != nil && f > *cd.max {
			return false
		}
	}
	return true
}

// inList compares numbers numerically (so "079" is 79) and other values exactly.
func inList(v string, list []string) bool {
	fv, vnum := numeric(v)
	for _, x := range list {
		if x == v {
			return true
		}
		if vnum {
			if fx, ok := numeric(x); ok && fx == fv {
				return true
			}
		}
	}
	return false
}

// String names the rule as pack/id.
func (c *Compiled) String() string { return c.Pack + "/" + c.ID }

package rules

import (
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules/printf"

	"gopkg.in/yaml.v3"
)

var (
	idRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	checkRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
)

// validator collects errors for one pack document, located through its YAML nodes.
type validator struct {
	p    *Pack
	root *yaml.Node
	// taints is the taints the packs may ask for.
	taints TaintPolicy
	errs   Errors
	// parsed holds the regexes parsed so far, by expression.
	parsed map[string]*regex
}

func (v *validator) errAt(n *yaml.Node, rule, format string, args ...any) {
	e := &Error{File: v.p.File, Pack: v.p.Metadata.Name, Rule: rule, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	v.errs = append(v.errs, e)
}

// at returns the node for keys under base, falling back to the nearest existing parent.
func at(base *yaml.Node, keys ...string) *yaml.Node {
	for i := len(keys); i >= 0; i-- {
		if n := lookup(base, keys[:i]...); n != nil {
			return n
		}
	}
	return base
}

func validatePack(p *Pack, doc *yaml.Node, taints TaintPolicy) Errors {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	v := &validator{p: p, root: root, taints: taints}
	if p.APIVersion != APIVersion {
		v.errAt(at(root, "apiVersion"), "", "apiVersion must be %q, not %q", APIVersion, p.APIVersion)
	}
	if p.Kind != Kind {
		v.errAt(at(root, "kind"), "", "kind must be %q, not %q", Kind, p.Kind)
	}
	if !idRe.MatchString(p.Metadata.Name) {
		v.errAt(at(root, "metadata", "name"), "", "metadata.name must be lower-case letters, digits, '.', '-' or '_' (got %q)", p.Metadata.Name)
	}
	d := p.Spec.Defaults
	dn := at(root, "spec", "defaults")
	v.enum(at(dn, "source"), "", "source", string(d.Source), true, ruleSources()...)
	v.enum(at(dn, "severity"), "", "severity", string(d.Severity), true, "critical", "warning", "info")
	v.enum(at(dn, "action"), "", "action", string(d.Action), true, "taint", "event", "probe", "none")
	v.enum(at(dn, "mode"), "", "mode", string(d.Mode), true, modeNames()...)
	v.taint(at(dn, "taint"), "", d.Taint)
	v.labels(at(dn, "labels"), "", d.Labels)
	v.probe(at(dn, "probe"), "", d.Probe)

	seen := map[string]bool{}
	seq := lookup(root, "spec", "rules")
	for i := range p.Spec.Rules {
		r := &p.Spec.Rules[i]
		rn := root
		if seq != nil && i < len(seq.Content) {
			rn = seq.Content[i]
		}
		r.Line = rn.Line
		id := r.ID
		if !idRe.MatchString(r.ID) {
			v.errAt(at(rn, "id"), id, "id must be 1-63 lower-case letters, digits, '.', '-' or '_' (got %q)", r.ID)
			if id == "" {
				id = fmt.Sprintf("#%d", i+1)
			}
		}
		if seen[r.ID] {
			v.errAt(at(rn, "id"), id, "duplicate rule id in pack")
		}
		seen[r.ID] = true
		v.rule(r, rn, id)
	}
	return v.errs
}

func (v *validator) enum(n *yaml.Node, rule, field, val string, emptyOK bool, allowed ...string) {
	if val == "" && emptyOK {
		return
	}
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	v.errAt(n, rule, "%s must be one of %v, not %q", field, allowed, val)
}

// ruleSources are the values of a rule's source: the log sources and any.
func ruleSources() []string { return append(logstream.SourceNames(), string(SourceAny)) }

func modeNames() []string {
	out := make([]string, len(Modes))
	for i, m := range Modes {
		out[i] = string(m)
	}
	return out
}

func (v *validator) taint(n *yaml.Node, rule string, t *Taint) {
	if t == nil {
		return
	}
	// An empty key or effect is the default (faultline.io/faulty, NoSchedule), which
	// every policy allows.
	switch {
	case t.Key != "" && !taintKeyRe.MatchString(t.Key):
		v.errAt(at(n, "key"), rule, "taint key %q is not a valid Kubernetes taint key", t.Key)
	case t.Key != "":
		if msg := v.taints.keyError(t.Key); msg != "" {
			v.errAt(at(n, "key"), rule, "%s", msg)
		}
	}
	if t.Value != "" && !taintValueRe.MatchString(t.Value) {
		v.errAt(at(n, "value"), rule, "taint value %q is not a valid label value", t.Value)
	}
	switch {
	case t.Effect == "":
	case !slices.Contains(TaintEffects, t.Effect):
		v.enum(at(n, "effect"), rule, "taint effect", t.Effect, false, TaintEffects...)
	default:
		if msg := v.taints.effectError(t.Effect); msg != "" {
			v.errAt(at(n, "effect"), rule, "%s", msg)
		}
	}
}

var (
	taintKeyRe   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	taintValueRe = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
)

func (v *validator) labels(n *yaml.Node, rule string, ls map[string]string) {
	for k, re := range ls {
		if _, err := regexp.Compile("^(?:" + re + ")$"); err != nil {
			v.errAt(at(n, k), rule, "label matcher %s: %v", k, err)
		}
	}
}

func (v *validator) probe(n *yaml.Node, rule string, p *Probe) {
	if p == nil {
		return
	}
	for i, c := range p.Checks {
		if !checkRe.MatchString(c) {
			cn := at(n, "checks")
			if cn != nil && cn.Kind == yaml.SequenceNode && i < len(cn.Content) {
				cn = cn.Content[i]
			}
			v.errAt(cn, rule, "probe check name %q is not valid", c)
		}
	}
	v.enum(at(n, "onTimeout"), rule, "probe onTimeout", p.OnTimeout, true, "taint", "ignore")
	v.enum(at(n, "whileBusy"), rule, "probe whileBusy", p.WhileBusy, true, WhileBusyTaintUnconfirmed, WhileBusyWait, WhileBusyIgnore)
}

func (v *validator) regex(n *yaml.Node, rule, what, expr string) *regex {
	if expr == "" {
		v.errAt(n, rule, "%s is empty", what)
		return nil
	}
	if re, ok := v.parsed[expr]; ok {
		return re // rules that share a regex (a YAML alias) parse it once
	}
	// Parsing finds every error regexp.Compile would; the program is compiled when
	// a line first needs it.
	re, err := parseRegex(expr)
	if err != nil {
		// RE2 has no backreferences or lookaround: say so, since authors meet it often.
		var se *syntax.Error
		msg := err.Error()
		if ok := asSyntax(err, &se); ok && se.Code == syntax.ErrInvalidPerlOp {
			msg += " (RE2 syntax: no lookahead, lookbehind or backreferences)"
		}
		v.errAt(n, rule, "%s does not compile: %s", what, msg)
		return nil
	}
	if v.parsed == nil {
		v.parsed = map[string]*regex{}
	}
	v.parsed[expr] = re
	return re
}

func asSyntax(err error, se **syntax.Error) bool {
	e, ok := err.(*syntax.Error)
	if ok {
		*se = e
	}
	return ok
}

func (v *validator) rule(r *Rule, rn *yaml.Node, id string) {
	v.enum(at(rn, "source"), id, "source", string(r.Source), true, ruleSources()...)
	if r.SameFaultAs == id && id != "" {
		v.errAt(at(rn, "sameFaultAs"), id, "sameFaultAs names the rule itself")
	}
	v.enum(at(rn, "severity"), id, "severity", string(r.Severity), true, "critical", "warning", "info")
	v.enum(at(rn, "action"), id, "action", string(r.Action), true, "taint", "event", "probe", "none")
	v.enum(at(rn, "mode"), id, "mode", string(r.Mode), true, modeNames()...)
	v.taint(at(rn, "taint"), id, r.Taint)
	v.labels(at(rn, "labels"), id, r.Labels)
	v.probe(at(rn, "probe"), id, r.Probe)
	v.escalate(at(rn, "escalate"), id, r)
	if r.Threshold != nil {
		tn := at(rn, "threshold")
		if r.Threshold.Count < 1 {
			v.errAt(at(tn, "count"), id, "threshold count must be at least 1")
		}
		if r.Threshold.Count > 1 && r.Threshold.Window <= 0 {
			v.errAt(at(tn, "window"), id, "threshold window must be set when count > 1")
		}
	}
	if r.Match == nil {
		return // an override that patches an earlier rule; checked when packs merge
	}
	mn := at(rn, "match")
	re := v.regex(at(mn, "regex"), id, "match.regex", r.Match.Regex)
	r.re = re
	names := map[string]bool{} // captures of both regexes, for sources
	primary := map[string]bool{}
	if re != nil {
		for _, n := range re.names {
			if n != "" {
				names[n], primary[n] = true, true
			}
		}
	}
	if r.Match.Companion != nil && r.Match.Companions != nil {
		v.errAt(at(mn, "companions"), id, "set companion or companions, not both")
	}
	if r.Match.Companions != nil && len(r.Match.Companions) == 0 {
		v.errAt(at(mn, "companions"), id, "companions is empty")
	}
	if len(r.Match.Companions) > MaxCompanions {
		v.errAt(at(mn, "companions"), id, "companions: %d, at most %d", len(r.Match.Companions), MaxCompanions)
	}
	comps := r.Match.CompanionList()
	r.companionRes = make([]*regex, len(comps))
	for i, c := range comps {
		field := companionField(*r.Match, i)
		cn := at(mn, "companion")
		if r.Match.Companion == nil {
			cn = item(at(mn, "companions"), i)
		}
		cre := v.regex(at(cn, "regex"), id, field+".regex", c.Regex)
		r.companionRes[i] = cre
		if cre != nil {
			for _, n := range cre.names {
				if n != "" {
					names[n] = true
				}
			}
		}
		v.enum(at(cn, "position"), id, field+" position", c.Position, true, "before", "after", "either")
		if c.Within.Lines < 0 || c.Within.Duration < 0 {
			v.errAt(at(cn, "within"), id, "%s: within.lines and within.duration cannot be negative", field)
		}
		if c.Within.Lines <= 0 && c.Within.Duration <= 0 {
			v.errAt(at(cn, "within"), id, "%s needs within.lines or within.duration", field)
		}
	}
	if len(comps) > 0 && r.Exclusive != "" {
		v.errAt(at(rn, "exclusive"), id, "a rule with a companion cannot be in an exclusive group")
	}
	for name, c := range r.Match.Where {
		wn := keyNode(mn, "where", name)
		if re != nil && !primary[name] {
			v.errAt(wn, id, "where: %q is not a named capture of match.regex", name)
		}
		if len(c.In) == 0 && len(c.NotIn) == 0 && c.Min == nil && c.Max == nil {
			v.errAt(wn, id, "where %s: set at least one of in, notIn, min, max", name)
		}
		if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
			v.errAt(wn, id, "where %s: min is greater than max", name)
		}
	}
	v.sources(at(rn, "sources"), id, "sources", r.Sources, names, len(comps))
	v.sources(at(rn, "benignSources"), id, "benignSources", r.BenignSources, nil, 0)
	tsn := at(rn, "tests")
	for i, t := range r.Tests {
		tn := tsn
		if tsn != nil && tsn.Kind == yaml.SequenceNode && i < len(tsn.Content) {
			tn = tsn.Content[i]
		}
		if (t.Line == "") == (len(t.Lines) == 0) {
			v.errAt(tn, id, "test %d: set exactly one of line or lines", i+1)
		}
		v.enum(at(tn, "source"), id, "test source", string(t.Source), true, logstream.SourceNames()...)
		v.enum(at(tn, "expect", "action"), id, "expected action", string(t.Expect.Action), true, "taint", "event", "probe", "none")
		v.enum(at(tn, "expect", "severity"), id, "expected severity", string(t.Expect.Severity), true, "critical", "warning", "info")
	}
}

// sourceCompanions checks the companion or companions of source s (field names
// it in errors): a source of a group rule may give one source per companion, in
// the order of the rule's companions.
func (v *validator) sourceCompanions(sn *yaml.Node, rule, field string, s SourceRef, names map[string]bool, companions int) {
	if s.Companion == nil && s.Companions == nil {
		return
	}
	key := "companion"
	if s.Companion == nil {
		key = "companions"
	}
	cs := s.CompanionList()
	switch {
	case s.Companion != nil && s.Companions != nil:
		v.errAt(at(sn, "companions"), rule, "%s: set companion or companions, not both", field)
	case names == nil:
		v.errAt(at(sn, key), rule, "%s: a benign source has no companion", field)
	case companions == 0:
		v.errAt(at(sn, key), rule, "%s: %s given, but the rule's match has no companion", field, key)
	case len(cs) != companions:
		v.errAt(at(sn, key), rule, "%s: %d companion sources, the rule's match has %d companions", field, len(cs), companions)
	default:
		for j, c := range cs {
			cn, cf := at(sn, "companion"), field+" companion"
			if s.Companion == nil {
				cn, cf = item(at(sn, "companions"), j), fmt.Sprintf("%s companion %d", field, j+1)
			}
			if c.Companion != nil || c.Companions != nil {
				v.errAt(cn, rule, "%s: a companion has no companion", cf)
				continue
			}
			v.sources(cn, rule, cf, []SourceRef{c}, names, 0)
		}
	}
}

// item returns element i of sequence n, or n when it has none (errors then point
// at the sequence).
func item(n *yaml.Node, i int) *yaml.Node {
	if n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
		return n.Content[i]
	}
	return n
}

// sources checks provenance entries: where the format comes from, that it parses,
// that its call is one whose prefix is known, and that fixed arguments and capture
// templates name conversions the format has (and captures the rule's regex has).
func (v *validator) sources(n *yaml.Node, rule, field string, refs []SourceRef, names map[string]bool, companions int) {
	for i, s := range refs {
		sn := item(n, i)
		for _, f := range []struct{ key, val string }{{"project", s.Project}, {"version", s.Version}, {"file", s.File}, {"format", s.Format}} {
			if f.val == "" {
				v.errAt(sn, rule, "%s %d: %s is not set", field, i+1, f.key)
			}
		}
		switch s.Kind {
		case "", SourcePrintf:
		case SourceConcat, SourceMacro:
			if s.Line <= 0 && s.Func == "" {
				v.errAt(sn, rule, "%s %d: kind %s needs line or func: where in %s the message is built", field, i+1, s.Kind, s.File)
			}
		default:
			v.errAt(at(sn, "kind"), rule, "%s %d: unknown kind %q (printf, concat or macro)", field, i+1, s.Kind)
		}
		v.sourceCompanions(sn, rule, fmt.Sprintf("%s %d", field, i+1), s, names, companions)
		if s.Call != "" && !printf.KnownCall(s.Call) {
			v.errAt(at(sn, "call"), rule, "%s %d: unknown printing call %q (see docs/rules.md)", field, i+1, s.Call)
		}
		convs, err := printf.Parse(s.Format)
		if err != nil {
			v.errAt(at(sn, "format"), rule, "%s %d: %v", field, i+1, err)
			continue
		}
		if _, err := printf.Parse(s.Prefix); err != nil {
			v.errAt(at(sn, "prefix"), rule, "%s %d: prefix: %v", field, i+1, err)
		}
		// Sorted: errors come out in the same order on every load.
		for _, k := range slices.Sorted(maps.Keys(s.Args)) {
			if k < 1 || k > len(convs) {
				v.errAt(at(sn, "args"), rule, "%s %d: args: conversion %d, the format has %d", field, i+1, k, len(convs))
			}
		}
		values := make([]string, len(convs))
		for _, name := range slices.Sorted(maps.Keys(s.Captures)) {
			tmpl := s.Captures[name]
			if names != nil && !names[name] {
				v.errAt(at(sn, "captures", name), rule, "%s %d: %q is not a named capture of the rule's regexes", field, i+1, name)
			}
			if _, err := printf.Expand(tmpl, values); err != nil {
				v.errAt(at(sn, "captures", name), rule, "%s %d: captures %s: %v", field, i+1, name, err)
			}
		}
	}
}

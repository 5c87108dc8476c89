package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/faultline-dev/faultline/rules/stepspec"
)

// Step is one rung of a rule's escalation ladder (Rule.Escalate): when its trigger
// holds for a fault already acted on, the controller takes the step's action. The
// steps are climbed in order, one at a time; each trigger counts from the time the
// step before it was reached (the fault's first action for the first step).
// Exactly one trigger is set per step.
type Step struct {
	Action StepAction `yaml:"action"`

	// Repeat: the rule fired again on the node Count times within Window.
	Repeat *Threshold `yaml:"repeat"`
	// Reboots: the rule fired again after the node rebooted this many times (boot
	// ids of the fault's lines).
	Reboots int `yaml:"reboots"`
	// ProbeFailed: a confirming probe of the rule failed.
	ProbeFailed bool `yaml:"probeFailed"`
	// TaintedFor: the node stayed tainted by the rule this long without recovery.
	TaintedFor Duration `yaml:"taintedFor"`

	// Template names the remediation template (action remediate): an object with
	// {{.Node}}-style placeholders the controller creates (see docs/controller.md).
	// It is a parameter: its step's spec (rules/stepspec) says which steps take it.
	Template string `yaml:"template"`
}

// Params returns the step's parameters that are set, by name.
func (s Step) Params() map[string]string {
	ps := map[string]string{}
	if s.Template != "" {
		ps["template"] = s.Template
	}
	return ps
}

// StepAction is what an escalation step does: the name of a step of
// rules/stepspec, which says what each one is.
type StepAction string

// The step actions the controller names (the others are only in rules/stepspec).
const (
	// StepTaint places the rule's taint (a ladder that starts with an event or a
	// watch and taints only on repetition).
	StepTaint StepAction = stepspec.Taint
	// StepDrain evicts the node's pods, respecting PodDisruptionBudgets.
	StepDrain StepAction = "drain"
	// StepGPUReset asks the node's probe agent to reset an idle GPU and re-runs
	// the confirming probe.
	StepGPUReset StepAction = "gpu-reset"
	// StepRemediate creates a remediation object from a template, for the
	// remediation operator the cluster runs (reboot, re-provisioning).
	StepRemediate StepAction = "remediate"
	// StepService labels the node and sets a Node condition for the hardware team.
	StepService StepAction = "service"
)

// TakesCapacity reports whether the step takes capacity away from the cluster: such
// steps pass through the budget and the storm hold, like a taint. A step the specs
// do not know (never one of a loaded pack) is taken to, the safe side.
func (a StepAction) TakesCapacity() bool {
	s, ok := stepspec.Get(string(a))
	return !ok || s.TakesCapacity
}

// Trigger renders the step's trigger for humans.
func (s Step) Trigger() string {
	switch {
	case s.Repeat != nil:
		return fmt.Sprintf("fired %d more time(s) within %s", s.Repeat.Count, s.Repeat.Window.D())
	case s.Reboots > 0:
		return fmt.Sprintf("fired again after %d reboot(s)", s.Reboots)
	case s.ProbeFailed:
		return "a confirming probe failed"
	case s.TaintedFor > 0:
		return fmt.Sprintf("tainted for %s without recovery", s.TaintedFor.D())
	}
	return "no trigger"
}

// maxSteps bounds a ladder: a longer one is a mistake, not a policy.
const maxSteps = 8

// escalate checks a rule's ladder.
func (v *validator) escalate(n *yaml.Node, rule string, r *Rule) {
	if len(r.Escalate) == 0 {
		return
	}
	if len(r.Escalate) > maxSteps {
		v.errAt(n, rule, "escalate has %d steps, at most %d", len(r.Escalate), maxSteps)
	}
	for i, s := range r.Escalate {
		sn := n
		if n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
			sn = n.Content[i]
		}
		names := stepspec.Names()
		if s.Action == "" {
			v.errAt(sn, rule, "escalate step %d: action is not set (one of %v)", i+1, names)
		} else {
			v.enum(at(sn, "action"), rule, fmt.Sprintf("escalate step %d: action", i+1), string(s.Action), false, names...)
		}
		triggers := 0
		if s.Repeat != nil {
			triggers++
			rn := at(sn, "repeat")
			if s.Repeat.Count < 1 {
				v.errAt(at(rn, "count"), rule, "escalate step %d: repeat count must be at least 1", i+1)
			}
			if s.Repeat.Window <= 0 {
				v.errAt(at(rn, "window"), rule, "escalate step %d: repeat window must be set", i+1)
			}
		}
		if s.Reboots < 0 {
			v.errAt(at(sn, "reboots"), rule, "escalate step %d: reboots must be positive", i+1)
		}
		if s.Reboots > 0 {
			triggers++
		}
		if s.ProbeFailed {
			triggers++
		}
		if s.TaintedFor > 0 {
			triggers++
		}
		if triggers != 1 {
			v.errAt(sn, rule, "escalate step %d: set exactly one trigger of repeat, reboots, probeFailed, taintedFor (found %d)", i+1, triggers)
		}
		if spec, ok := stepspec.Get(string(s.Action)); ok {
			v.stepParams(sn, rule, i, spec, s.Params())
		}
	}
}

// stepParams checks a step's parameters against its spec.
func (v *validator) stepParams(sn *yaml.Node, rule string, i int, spec stepspec.Spec, ps map[string]string) {
	for _, p := range spec.Params {
		val, set := ps[p.Name]
		switch {
		case !set && p.Required:
			v.errAt(sn, rule, "escalate step %d: %s needs %s (%s)", i+1, spec.Name, p.Name, p.Help)
		case set:
			if msg := p.Check(val); msg != "" {
				v.errAt(at(sn, p.Name), rule, "escalate step %d: %s", i+1, msg)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ps)) {
		if _, ok := spec.Param(name); ok {
			continue
		}
		var takers []string
		for _, o := range stepspec.All() {
			if _, ok := o.Param(name); ok {
				takers = append(takers, o.Name)
			}
		}
		v.errAt(at(sn, name), rule, "escalate step %d: %s is only for action %s", i+1, name, strings.Join(takers, ", "))
	}
}

// ladderError checks a compiled rule's ladder against what it inherited (action,
// probe): "" when it holds.
func ladderError(c *Compiled) string {
	if len(c.Escalate) == 0 {
		return ""
	}
	if c.Action != ActionTaint && c.Action != ActionProbe {
		return fmt.Sprintf("escalate needs action taint or probe: a ladder climbs from a taint (action is %q)", c.Action)
	}
	for i, s := range c.Escalate {
		if s.ProbeFailed && len(c.Probe.Checks) == 0 {
			return fmt.Sprintf("escalate step %d: probeFailed needs the rule's probe.checks", i+1)
		}
		// A drain does not cordon: the rule's taint keeps the evicted pods away.
		if spec, _ := stepspec.Get(string(s.Action)); spec.EvictsPods && c.Taint.Effect == "PreferNoSchedule" {
			return fmt.Sprintf("escalate step %d: %s needs a taint that keeps pods away (NoSchedule or NoExecute), not %s", i+1, s.Action, c.Taint.Effect)
		}
	}
	return ""
}

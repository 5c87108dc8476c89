package rules

import (
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"
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
	Template string `yaml:"template"`
}

// StepAction is what an escalation step does.
type StepAction string

// Step actions.
const (
	// StepTaint places the rule's taint (a ladder that starts with an event or a
	// watch and taints only on repetition).
	StepTaint StepAction = "taint"
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

// StepActions lists the step actions as written in packs.
var StepActions = []StepAction{StepTaint, StepDrain, StepGPUReset, StepRemediate, StepService}

// TakesCapacity reports whether the step takes capacity away from the cluster: such
// steps pass through the budget and the storm hold, like a taint.
func (a StepAction) TakesCapacity() bool { return a != StepService }

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

var templateRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._]{0,61}[a-z0-9])?$`)

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
		names := make([]string, len(StepActions))
		for j, a := range StepActions {
			names[j] = string(a)
		}
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
		switch {
		case s.Action == StepRemediate && s.Template == "":
			v.errAt(sn, rule, "escalate step %d: remediate needs template (the name of a remediation template)", i+1)
		case s.Action == StepRemediate && !templateRe.MatchString(s.Template):
			v.errAt(at(sn, "template"), rule, "escalate step %d: template %q is not a valid name", i+1, s.Template)
		case s.Action != StepRemediate && s.Template != "":
			v.errAt(at(sn, "template"), rule, "escalate step %d: template is only for action remediate", i+1)
		}
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
		// The drain does not cordon: the rule's taint keeps the evicted pods away.
		if s.Action == StepDrain && c.Taint.Effect == "PreferNoSchedule" {
			return fmt.Sprintf("escalate step %d: drain needs a taint that keeps pods away (NoSchedule or NoExecute), not %s", i+1, c.Taint.Effect)
		}
	}
	return ""
}

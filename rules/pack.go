// Package rules holds the rule pack format, its loader and compiler, and the matcher
// that finds fault lines. The same engine serves the controller (lines from Loki)
// and `faultline scan` (any log file).
package rules

import (
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/faultline-dev/faultline/logstream"
)

// APIVersion and Kind identify a rule pack document.
const (
	APIVersion = "faultline.io/v1"
	Kind       = "RulePack"
)

// Pack is one YAML rule pack document.
type Pack struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   PackMeta `yaml:"metadata"`
	Spec       PackSpec `yaml:"spec"`

	// File is where the pack was loaded from (set by the loader).
	File string `yaml:"-"`
}

// PackMeta names and describes a pack.
type PackMeta struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// PackSpec holds the pack's defaults and rules.
type PackSpec struct {
	Defaults Defaults `yaml:"defaults"`
	Rules    []Rule   `yaml:"rules"`
}

// Defaults apply to every rule of the pack that does not set the field itself.
type Defaults struct {
	Source   Source            `yaml:"source"`
	Labels   map[string]string `yaml:"labels"`
	Severity Severity          `yaml:"severity"`
	Action   Action            `yaml:"action"`
	Taint    *Taint            `yaml:"taint"`
	Probe    *Probe            `yaml:"probe"`
	Recover  *Recover          `yaml:"recover"`
	Cooldown Duration          `yaml:"cooldown"`
	// Mode is the pack's adoption stage (see Mode); enforce when unset.
	Mode Mode `yaml:"mode"`
}

// Rule says which lines mean a fault and what to do about them.
type Rule struct {
	ID          string            `yaml:"id"`
	Description string            `yaml:"description"`
	Enabled     *bool             `yaml:"enabled"`
	Source      Source            `yaml:"source"`
	Labels      map[string]string `yaml:"labels"`
	Match       *Match            `yaml:"match"`
	// Exclusive names an ordered group: a line fires at most one rule of the group,
	// the first (in load order) whose regex and conditions match.
	Exclusive string     `yaml:"exclusive"`
	Severity  Severity   `yaml:"severity"`
	Action    Action     `yaml:"action"`
	Taint     *Taint     `yaml:"taint"`
	Probe     *Probe     `yaml:"probe"`
	Threshold *Threshold `yaml:"threshold"`
	Cooldown  Duration   `yaml:"cooldown"`
	Recover   *Recover   `yaml:"recover"`
	// Mode overrides the pack's mode for this rule.
	Mode Mode `yaml:"mode"`
	// Escalate is the rule's escalation ladder (see Step): what to do, in order,
	// when a fault it acted on comes back, persists or fails its probe.
	Escalate []Step     `yaml:"escalate"`
	Tests    []RuleTest `yaml:"tests"`
	// Sources are the format strings, in the programs that print them, whose lines
	// the rule catches; BenignSources are format strings it must not catch.
	Sources       []SourceRef `yaml:"sources"`
	BenignSources []SourceRef `yaml:"benignSources"`
	// SameFaultAs names (by id) the rule whose fault this rule's firings are: a
	// second witness of the same fault, such as an NVML Xid event next to the
	// kernel's Xid line. Its firings then go to that rule's fault (one NodeFault,
	// that rule's action, taint, budget and recovery); while that rule is absent
	// or disabled, the rule stands alone.
	SameFaultAs string `yaml:"sameFaultAs"`

	// Line is where the rule starts in its file (set by the loader).
	Line int `yaml:"-"`

	// re and companionRes are match.regex and the companions' regexes (see
	// Match.CompanionList) as validation parsed them, so that Compile does not parse
	// them again.
	re           *regex
	companionRes []*regex
}

// Match is the line pattern of a rule.
type Match struct {
	Regex     string               `yaml:"regex"`
	Where     map[string]Condition `yaml:"where"`
	Companion *Companion           `yaml:"companion"`
	// Companions is a group of more than two lines: every companion must be seen
	// within its bounds of the primary line. A rule gives companion or companions.
	Companions []Companion `yaml:"companions"`
}

// CompanionList returns the match's companions: companions, or the one companion.
func (m *Match) CompanionList() []Companion {
	if m.Companion != nil {
		return []Companion{*m.Companion}
	}
	return m.Companions
}

// Condition restricts a named capture. All set fields must hold.
type Condition struct {
	In    StringList `yaml:"in"`
	NotIn StringList `yaml:"notIn"`
	Min   *float64   `yaml:"min"`
	Max   *float64   `yaml:"max"`
}

// Companion requires another line of the same stream near the primary one: the
// rule fires only when the primary and all its companions are seen (multi-line
// groups such as SXid reports).
type Companion struct {
	Regex    string `yaml:"regex"`
	Position string `yaml:"position"` // before, after or either (default)
	Within   Within `yaml:"within"`
}

// Within bounds a companion's distance: at most Lines lines and Duration apart.
type Within struct {
	Lines    int      `yaml:"lines"`
	Duration Duration `yaml:"duration"`
}

// Threshold makes a rule fire only after Count matches on one node within Window.
type Threshold struct {
	Count  int      `yaml:"count"`
	Window Duration `yaml:"window"`
}

// Taint is the Kubernetes taint a `taint` rule places.
type Taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

// Probe names the active checks a `probe` rule runs on the node; the node is
// tainted only if a check fails.
type Probe struct {
	Checks    []string `yaml:"checks"`
	OnTimeout string   `yaml:"onTimeout"` // taint or ignore (default)
	// WhileBusy says what happens while pods hold the node's GPUs and the invasive
	// checks cannot run (the harmless ones run at once; one that fails taints):
	// WhileBusyTaintUnconfirmed (default), WhileBusyWait or WhileBusyIgnore.
	WhileBusy string `yaml:"whileBusy"`
}

// The values of Probe.WhileBusy.
const (
	// WhileBusyTaintUnconfirmed: the rule's taint key is placed with the value
	// "unconfirmed" (the running pods stay, no new ones come) and the invasive checks
	// run once the GPUs are free: a failure confirms the taint, a pass removes it.
	WhileBusyTaintUnconfirmed = "taint-unconfirmed"
	// WhileBusyWait: no taint until the invasive checks ran once the GPUs are free.
	WhileBusyWait = "wait"
	// WhileBusyIgnore: the refused checks reach no verdict, and onTimeout decides.
	WhileBusyIgnore = "ignore"
)

// Recover is a rule's recovery policy. In YAML it is `manual`, `reboot`, or a
// mapping {after: 24h, onReboot: true, probes: [pciebw]}.
type Recover struct {
	Manual   bool     `yaml:"-"`
	After    Duration `yaml:"after"`
	OnReboot bool     `yaml:"onReboot"`
	Probes   []string `yaml:"probes"`
}

// RuleTest is an inline test: a line (or a sequence of lines, the last one checked)
// and what the rule must do with it.
type RuleTest struct {
	Line   string            `yaml:"line"`
	Lines  []string          `yaml:"lines"`
	Source Source            `yaml:"source"`
	Labels map[string]string `yaml:"labels"`
	Expect Expect            `yaml:"expect"`
}

// SourceRef is the provenance of a rule: one format string of a program (a printk
// call of a kernel driver, an NV_PRINTF of the GPU driver, a WARN of NCCL) that
// prints the lines the rule is for. `faultline rules test` instantiates it with
// generated values under every common log prefix and checks the rule.
type SourceRef struct {
	Project string `yaml:"project"` // torvalds/linux, NVIDIA/open-gpu-kernel-modules, ...
	Version string `yaml:"version"` // release tag or commit
	File    string `yaml:"file"`    // path in the project
	// Call is the printing function or macro (dev_err, mlx5_core_err, NV_PRINTF, ...):
	// it decides the prefix the program adds before the format (see printf.Calls).
	Call string `yaml:"call"`
	// Func is the enclosing C function, for calls that print its name.
	Func string `yaml:"func"`
	// Prefix is the file's pr_fmt, when it has one ("mce: ").
	Prefix string `yaml:"prefix"`
	Format string `yaml:"format"`
	// Args fixes the value of conversion n (1-based) where the meaning depends on
	// it (the Xid code of an Xid format).
	Args map[int]string `yaml:"args"`
	// Captures are what the rule must capture from a generated line: templates over
	// the values of the format's conversions ($1, $2, ...).
	Captures map[string]string `yaml:"captures"`
	// Kind says how the program builds the line (SourcePrintf when empty).
	Kind SourceKind `yaml:"kind"`
	// Line is the line of File where the code builds the message; the kinds whose
	// format is not written out in one place (concat, macro) need Line or Func.
	Line int `yaml:"line"`
	// Companion is the source of the line a rule's match.companion requires (the
	// link-up before a link-down): the tester prints it with this source, on the
	// side of the primary line the companion's position asks for.
	Companion *SourceRef `yaml:"companion"`
	// Companions are the sources of the lines of match.companions, in their order.
	Companions []SourceRef `yaml:"companions"`
	// NotAlone names the lines (1-based) of a multi-line format that are not
	// distinctive on their own (a generic "Call Trace:", a register line), with
	// why. Every other line must match the rule alone: a log pipeline or a paste
	// may keep only some lines of a multi-line message.
	NotAlone map[int]string `yaml:"notAlone"`
}

// SourceKind is how a program builds a line from its code.
type SourceKind string

// Source kinds. Each is instantiated the same way (Format's conversions get
// generated values); the kind records what Format stands for.
const (
	// SourcePrintf: Format is the format string passed to Call.
	SourcePrintf SourceKind = "printf"
	// SourceConcat: the program joins literal pieces and runtime values (C++
	// streams, c10::str, string +, Python f-strings); Format is the pieces in order
	// with a conversion for each runtime part (%s a string, %d a number).
	SourceConcat SourceKind = "concat"
	// SourceMacro: a macro joins the format across definitions (NVSWITCH_PRINT_SXID,
	// NV_ERROR_LOG_DATA); Format is the joined format, prefixes of the macro included.
	SourceMacro SourceKind = "macro"
)

// Expect is the outcome an inline test checks on its last line.
type Expect struct {
	Match    *bool             `yaml:"match"` // default true
	Captures map[string]string `yaml:"captures"`
	Action   Action            `yaml:"action"`
	Severity Severity          `yaml:"severity"`
	// Evidence is the number of lines the outcome's evidence holds (0: any), so a
	// test shows a multi-line group's lines all in the fault.
	Evidence int `yaml:"evidence"`
}

// Source is the kind of log a rule reads.
type Source string

// Sources.
const (
	SourceKernel Source = logstream.SourceKernel
	SourcePod    Source = logstream.SourcePod
	SourceNVML   Source = logstream.SourceNVML
	SourceProbe  Source = logstream.SourceProbe
	SourceAny    Source = "any"
)

// Severity of a rule.
type Severity string

// Severities, from most to least severe.
const (
	SeverityCritical Severity = "critical"
	SeverityWarning  Severity = "warning"
	SeverityInfo     Severity = "info"
)

// Rank orders severities: critical 3, warning 2, info 1, unknown 0.
func (s Severity) Rank() int {
	switch s {
	case SeverityCritical:
		return 3
	case SeverityWarning:
		return 2
	case SeverityInfo:
		return 1
	}
	return 0
}

// Action is what a fired rule does.
type Action string

// Actions.
const (
	ActionTaint Action = "taint"
	ActionEvent Action = "event"
	ActionProbe Action = "probe"
	ActionNone  Action = "none"
)

// Mode is how far a fired rule may act, so a rule can be adopted in stages:
// observe it, then let it annotate, then let it enforce its action.
type Mode string

// Modes, from least to most.
const (
	// ModeObserve: the firing is counted (metric by mode) and logged; nothing is
	// written to the cluster.
	ModeObserve Mode = "observe"
	// ModeAnnotate: the firing is recorded (NodeFault, Event) but takes no
	// capacity: no taint, no probe.
	ModeAnnotate Mode = "annotate"
	// ModeEnforce: the rule's action, as written (the default).
	ModeEnforce Mode = "enforce"
)

// Modes lists the modes from least to most, as written in packs and flags.
var Modes = []Mode{ModeObserve, ModeAnnotate, ModeEnforce}

// Rank orders modes: observe 1, annotate 2, enforce 3, unknown 0.
func (m Mode) Rank() int {
	switch m {
	case ModeObserve:
		return 1
	case ModeAnnotate:
		return 2
	case ModeEnforce:
		return 3
	}
	return 0
}

// Cap lowers m to at most ceiling; an empty or unknown ceiling caps nothing.
func (m Mode) Cap(ceiling Mode) Mode {
	if ceiling.Rank() > 0 && ceiling.Rank() < m.Rank() {
		return ceiling
	}
	return m
}

// ParseMode reads a mode as written in a pack or a flag.
func ParseMode(s string) (Mode, error) {
	if m := Mode(s); m.Rank() > 0 {
		return m, nil
	}
	return "", fmt.Errorf("mode must be one of %v, not %q", Modes, s)
}

// Duration is a time.Duration written as "10m", "24h", "1h30m" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration must be a string such as 10m", n.Line)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: bad duration %q: %v", n.Line, n.Value, err)
	}
	if v < 0 {
		return fmt.Errorf("line %d: negative duration %q", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// StringList accepts scalars of any type (79, "79", 0x4f) as strings, so capture
// conditions can list numbers naturally.
type StringList []string

// UnmarshalYAML accepts a scalar or a sequence of scalars.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: list items must be scalars", c.Line)
			}
			out = append(out, c.Value)
		}
		*l = out
	default:
		return fmt.Errorf("line %d: expected a value or a list of values", n.Line)
	}
	return nil
}

// UnmarshalYAML accepts `manual`, `reboot` or a mapping.
func (r *Recover) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case "manual":
			*r = Recover{Manual: true}
		case "reboot":
			*r = Recover{OnReboot: true}
		default:
			return fmt.Errorf("line %d: recover must be manual, reboot or a mapping {after, onReboot, probes}, not %q", n.Line, n.Value)
		}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: recover must be manual, reboot or a mapping {after, onReboot, probes}", n.Line)
	}
	// Node.Decode is not strict, so check the keys here to keep unknown fields errors.
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "after", "onReboot", "probes":
		default:
			return fmt.Errorf("line %d: field %s not found in type rules.Recover", k.Line, k.Value)
		}
	}
	type plain Recover
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*r = Recover(p)
	return nil
}

// String renders the policy for humans.
func (r *Recover) String() string {
	if r == nil || r.Manual {
		return "manual"
	}
	s := ""
	if r.After > 0 {
		s = "after " + r.After.D().String()
	}
	if r.OnReboot {
		if s != "" {
			s += ", "
		}
		s += "on reboot"
	}
	if len(r.Probes) > 0 {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("when probes %v pass", r.Probes)
	}
	if s == "" {
		return "manual"
	}
	return s
}

// numeric reports whether s is a decimal or 0x-hex integer, and its value.
func numeric(s string) (float64, bool) {
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		return float64(i), true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, true
	}
	return 0, false
}

// CompanionList returns the source's companions: companions, or the one companion.
func (s *SourceRef) CompanionList() []SourceRef {
	if s.Companion != nil {
		return []SourceRef{*s.Companion}
	}
	return s.Companions
}

// MaxCompanions bounds the companions of one rule: a group of more lines is no
// longer one message.
const MaxCompanions = 16

// companionField names companion i of m in errors: match.companion, or
// match.companions[i] (1-based).
func companionField(m Match, i int) string {
	if m.Companion != nil {
		return "match.companion"
	}
	return fmt.Sprintf("match.companions[%d]", i+1)
}

// Package sources holds the inventory of what the programs faultline watches can
// print at error level — one file per source file and version, extracted from the
// real file — and measures how much of it the rule packs cover: each message is
// covered by a rule (decided by matching a line generated from its format string)
// or ignored with a one-line reason.
package sources

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/printf"
)

// MaxInventoryFile bounds one inventory file.
const MaxInventoryFile = 4 << 20

// Inventory is the error-level messages of one source file at one version.
type Inventory struct {
	Project string `yaml:"project" json:"project"`
	Version string `yaml:"version" json:"version"`
	File    string `yaml:"file" json:"file"`
	// Source is the kind of log the messages reach: kernel or pod.
	Source rules.Source `yaml:"source" json:"source"`
	// Prefix is the file's pr_fmt, printed before pr_err formats.
	Prefix string `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	// DevPrefix is the file's dev_fmt, printed after the device by dev_err formats.
	DevPrefix string    `yaml:"devPrefix,omitempty" json:"devPrefix,omitempty"`
	Messages  []Message `yaml:"messages" json:"messages"`

	// Path is the inventory file it was read from (set by Load).
	Path string `yaml:"-" json:"-"`
}

// Name is project@version:file.
func (inv *Inventory) Name() string { return inv.Project + "@" + inv.Version + ":" + inv.File }

// Load reads every *.yaml inventory file of dir, in name order.
func Load(dir string) ([]*Inventory, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	var out []*Inventory
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		inv, err := ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, inv)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read inventory: no *.yaml file in %s", dir)
	}
	return out, nil
}

// ReadFile reads and checks one inventory file.
func ReadFile(p string) (*Inventory, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	if st.Size() > MaxInventoryFile {
		return nil, fmt.Errorf("inventory %s: %d bytes is over the limit of %d", p, st.Size(), MaxInventoryFile)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	var inv Inventory
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&inv); err != nil {
		return nil, fmt.Errorf("inventory %s: %w", p, err)
	}
	inv.Path = p
	if inv.Project == "" || inv.Version == "" || inv.File == "" {
		return nil, fmt.Errorf("inventory %s: project, version and file must be set", p)
	}
	if inv.Source != rules.SourceKernel && inv.Source != rules.SourcePod {
		return nil, fmt.Errorf("inventory %s: source must be kernel or pod, not %q", p, inv.Source)
	}
	for i, m := range inv.Messages {
		if _, err := printf.Parse(m.Format); err != nil {
			return nil, fmt.Errorf("inventory %s: message %d (line %d): %w", p, i+1, m.Line, err)
		}
		if !printf.KnownCall(m.Call) {
			return nil, fmt.Errorf("inventory %s: message %d (line %d): unknown call %q", p, i+1, m.Line, m.Call)
		}
	}
	return &inv, nil
}

// Write stores an inventory as YAML.
func Write(p string, inv *Inventory) error {
	n := inventoryNode(inv)
	quoteSpaces(n)
	var buf strings.Builder
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return fmt.Errorf("write inventory %s: %w", p, err)
	}
	data := []byte(buf.String())
	head := "# Error-level messages of " + inv.Name() + ", extracted by\n" +
		"# rules/sources/extract; each is covered by a rule or ignored with a reason.\n"
	if err := os.WriteFile(p, append([]byte(head), data...), 0o644); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	return nil
}

// inventoryNode builds the YAML of an inventory by hand: yaml.v3 re-parses what
// Node.Encode writes, and its block scalars cannot hold a format's leading tab.
func inventoryNode(inv *Inventory) *yaml.Node {
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
	num := func(v int) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)} }
	mapping := func(kv ...any) *yaml.Node {
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for i := 0; i+1 < len(kv); i += 2 {
			v := kv[i+1].(*yaml.Node)
			if v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value == "" {
				continue
			}
			m.Content = append(m.Content, str(kv[i].(string)), v)
		}
		return m
	}
	msgs := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, m := range inv.Messages {
		f := str(m.Format)
		f.Style = yaml.DoubleQuotedStyle
		msgs.Content = append(msgs.Content, mapping("line", num(m.Line), "call", str(m.Call), "level", str(m.Level),
			"func", str(m.Func), "format", f, "rule", str(m.Rule), "ignore", str(m.Ignore)))
	}
	root := mapping("project", str(inv.Project), "version", str(inv.Version), "file", str(inv.File),
		"source", str(string(inv.Source)), "prefix", str(inv.Prefix), "devPrefix", str(inv.DevPrefix))
	root.Content = append(root.Content, str("messages"), msgs)
	return root
}

// quoteSpaces double-quotes scalars with tabs, newlines or edge spaces, which
// block styles cannot carry faithfully.
func quoteSpaces(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && (strings.ContainsAny(n.Value, "\t\n") || strings.TrimSpace(n.Value) != n.Value) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		quoteSpaces(c)
	}
}

// Lines generates the log lines of one message (a format can span several), with
// fixed values for some conversions (nil: all generated).
func Lines(inv *Inventory, m Message, fixed map[int]string) ([]string, error) {
	prefix := inv.Prefix
	if printf.DeviceCall(m.Call) {
		prefix = inv.DevPrefix
	}
	in, err := printf.Message(m.Call, m.Func, prefix, inv.File, m.Format, 0, fixed)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: %w", inv.File, m.Line, err)
	}
	return printf.Lines(in.Text), nil
}

// argSets returns the value sets to generate a message with: none fixed, then the
// args of every rule source that cites the message's project, file and format.
// Where a conversion's meaning decides the fault (an Xid code, a device name), the
// rules that cite the format say which values they are about.
func argSets(e *rules.Engine, inv *Inventory, m Message) []map[int]string {
	sets := []map[int]string{nil}
	for _, r := range e.Set().Rules {
		for _, src := range r.Sources {
			if src.Project == inv.Project && src.File == inv.File && src.Format == m.Format && len(src.Args) > 0 {
				sets = append(sets, src.Args)
			}
		}
	}
	return sets
}

// Classify returns the rules (pack/id, in load order) that a line generated from
// the message matches with an action other than none: the rules that cover it.
func Classify(e *rules.Engine, inv *Inventory, m Message) ([]string, error) {
	seen := map[*rules.Compiled]bool{}
	var hits []rules.Hit
	for _, fixed := range argSets(e, inv, m) {
		lines, err := Lines(inv, m, fixed)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			hits = e.Match(rules.Line{Text: l, Source: inv.Source}, hits[:0])
			for _, h := range hits {
				if !h.Companion && h.Rule.Action != rules.ActionNone {
					seen[h.Rule] = true
				}
			}
		}
	}
	var out []*rules.Compiled
	for r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	ids := make([]string, len(out))
	for i, r := range out {
		ids[i] = r.String()
	}
	return ids, nil
}

// Counts are the coverage figures of one source file, or of all.
type Counts struct {
	Messages    int `json:"messages"`
	Covered     int `json:"covered"`
	Ignored     int `json:"ignored"`
	Unaccounted int `json:"unaccounted"`
}

func (c *Counts) add(o Counts) {
	c.Messages += o.Messages
	c.Covered += o.Covered
	c.Ignored += o.Ignored
	c.Unaccounted += o.Unaccounted
}

// FileCoverage is the coverage of one inventory file.
type FileCoverage struct {
	Project string `json:"project"`
	Version string `json:"version"`
	File    string `json:"file"`
	Counts
	// Unaccounted lists the messages neither covered nor ignored; Stale the
	// covered messages whose recorded rule is no longer among those that match.
	UnaccountedMessages []Message `json:"unaccountedMessages,omitempty"`
	Stale               []string  `json:"stale,omitempty"`
}

// Report is the coverage of a whole inventory.
type Report struct {
	Sources []FileCoverage `json:"sources"`
	Total   Counts         `json:"total"`
}

// Coverage classifies every message of the inventories against the engine's rules.
func Coverage(e *rules.Engine, invs []*Inventory) (*Report, error) {
	rep := &Report{}
	for _, inv := range invs {
		fc := FileCoverage{Project: inv.Project, Version: inv.Version, File: inv.File}
		for _, m := range inv.Messages {
			fc.Messages++
			ids, err := Classify(e, inv, m)
			if err != nil {
				return nil, err
			}
			switch {
			case len(ids) > 0:
				fc.Covered++
				if m.Rule != "" && !contains(ids, m.Rule) {
					fc.Stale = append(fc.Stale, fmt.Sprintf("line %d: recorded %s, matches %s", m.Line, m.Rule, strings.Join(ids, ", ")))
				}
			case m.Ignore != "":
				fc.Ignored++
			default:
				fc.Unaccounted++
				fc.UnaccountedMessages = append(fc.UnaccountedMessages, m)
			}
		}
		rep.Total.add(fc.Counts)
		rep.Sources = append(rep.Sources, fc)
	}
	return rep, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Refresh records, for every message, the first rule that covers it (clearing the
// rule of messages no longer covered), so the inventory says which rule covers what.
func Refresh(e *rules.Engine, inv *Inventory) error {
	for i := range inv.Messages {
		ids, err := Classify(e, inv, inv.Messages[i])
		if err != nil {
			return err
		}
		inv.Messages[i].Rule = ""
		if len(ids) > 0 {
			inv.Messages[i].Rule = ids[0]
		}
	}
	return nil
}

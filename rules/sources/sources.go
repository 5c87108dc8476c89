// Package sources holds the inventory of what the programs faultline watches can
// print at error level — one file per source file and version, extracted from the
// real file — and measures how much of it the rule packs cover: each message is
// covered by a rule (decided by matching a line generated from its format string)
// or ignored with a one-line reason.
package sources

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/printf"
)

// MaxInventoryFile bounds one inventory file.
const MaxInventoryFile = 8 << 20

// Inventory is the messages one source file prints, across the versions of the
// file that fleets run: a message whose wording did not change is one entry that
// lists the versions printing it; a changed wording is an entry of its own.
type Inventory struct {
	Project string `yaml:"project" json:"project"`
	File    string `yaml:"file" json:"file"`
	// Source is the kind of log the messages reach: kernel or pod.
	Source rules.Source `yaml:"source" json:"source"`
	// Versions are the versions of the file read, newest first.
	Versions []Version `yaml:"versions" json:"versions"`
	Messages []Message `yaml:"messages" json:"messages"`

	// Path is the inventory file it was read from (set by Load).
	Path string `yaml:"-" json:"-"`
}

// Version is one version of a source file that the inventory was extracted from.
type Version struct {
	// Version is the release: a tag (v6.12.117, 595.45.04, v2.30.7-1).
	Version string `yaml:"version" json:"version"`
	// From says where the file of that version was read (a package, a tag).
	From string `yaml:"from,omitempty" json:"from,omitempty"`
	// Prefix is the file's pr_fmt in that version, printed before pr_err formats.
	Prefix string `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	// DevPrefix is the file's dev_fmt, printed after the device by dev_err formats.
	DevPrefix string `yaml:"devPrefix,omitempty" json:"devPrefix,omitempty"`
}

// Name is project:file.
func (inv *Inventory) Name() string { return inv.Project + ":" + inv.File }

// version returns the entry of v, or nil.
func (inv *Inventory) version(v string) *Version {
	for i := range inv.Versions {
		if inv.Versions[i].Version == v {
			return &inv.Versions[i]
		}
	}
	return nil
}

// prefixes returns the pr_fmt and dev_fmt a message is printed with: those of
// the newest version that prints it.
func (inv *Inventory) prefixes(m Message) (prefix, devPrefix string) {
	for _, v := range inv.Versions {
		if contains(m.Versions, v.Version) {
			return v.Prefix, v.DevPrefix
		}
	}
	return "", ""
}

// FileName is the name of the inventory file of a project's source file.
func FileName(project, file string) string {
	r := strings.NewReplacer("/", "_", " ", "_", "@", "_", ":", "_")
	return r.Replace(project) + "__" + r.Replace(file) + ".yaml"
}

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
	if inv.Project == "" || inv.File == "" || len(inv.Versions) == 0 {
		return nil, fmt.Errorf("inventory %s: project, file and versions must be set", p)
	}
	if inv.Source != rules.SourceKernel && inv.Source != rules.SourcePod {
		return nil, fmt.Errorf("inventory %s: source must be kernel or pod, not %q", p, inv.Source)
	}
	seen := map[string]bool{}
	for _, v := range inv.Versions {
		if v.Version == "" || seen[v.Version] {
			return nil, fmt.Errorf("inventory %s: version %q is empty or listed twice", p, v.Version)
		}
		seen[v.Version] = true
	}
	for i, m := range inv.Messages {
		if _, err := printf.Parse(m.Format); err != nil {
			return nil, fmt.Errorf("inventory %s: message %d (line %d): %w", p, i+1, m.Line, err)
		}
		if !printf.KnownCall(m.Call) {
			return nil, fmt.Errorf("inventory %s: message %d (line %d): unknown call %q", p, i+1, m.Line, m.Call)
		}
		if len(m.Versions) == 0 {
			return nil, fmt.Errorf("inventory %s: message %d (line %d): no version prints it", p, i+1, m.Line)
		}
		for _, v := range m.Versions {
			if !seen[v] {
				return nil, fmt.Errorf("inventory %s: message %d (line %d): version %q is not among the file's versions", p, i+1, m.Line, v)
			}
		}
	}
	return &inv, nil
}

// Merge adds the messages one version of the file prints (x, extracted from that
// version) to the inventory: a message printed with the same call, format and
// prefix as an entry gets the version added to its list; any other is a new
// entry. The versions stay ordered as given by order (newest first).
func (inv *Inventory) Merge(v Version, x Extracted, order func(a, b string) bool) {
	v.Prefix, v.DevPrefix = x.Prefix, x.DevPrefix
	key := func(m Message, prefix, devPrefix string) string {
		p := prefix
		if printf.DeviceCall(m.Call) {
			p = devPrefix
		}
		return m.Call + "\x00" + m.Format + "\x00" + p
	}
	// Entries are found by what they print, before a re-extracted version is
	// taken off them, so their ignore reasons stay.
	at := map[string]int{}
	for i, m := range inv.Messages {
		p, dp := inv.prefixes(m)
		at[key(m, p, dp)] = i
	}
	if old := inv.version(v.Version); old != nil {
		// Re-extracting a version replaces what it printed.
		*old = v
		for i := range inv.Messages {
			inv.Messages[i].Versions = without(inv.Messages[i].Versions, v.Version)
		}
	} else {
		inv.Versions = append(inv.Versions, v)
	}
	sort.SliceStable(inv.Versions, func(i, j int) bool { return order(inv.Versions[i].Version, inv.Versions[j].Version) })
	for _, m := range x.Messages {
		k := key(m, v.Prefix, v.DevPrefix)
		if i, ok := at[k]; ok {
			e := &inv.Messages[i]
			if !contains(e.Versions, v.Version) {
				e.Versions = append(e.Versions, v.Version)
			}
			continue
		}
		m.Versions = []string{v.Version}
		at[k] = len(inv.Messages)
		inv.Messages = append(inv.Messages, m)
	}
	// Drop entries no version prints any more; order each entry's versions and
	// the entries by where the newest version that prints them has them.
	kept := inv.Messages[:0]
	for _, m := range inv.Messages {
		if len(m.Versions) > 0 {
			sort.SliceStable(m.Versions, func(i, j int) bool { return order(m.Versions[i], m.Versions[j]) })
			kept = append(kept, m)
		}
	}
	inv.Messages = kept
	rank := map[string]int{}
	for i, v := range inv.Versions {
		rank[v.Version] = i
	}
	sort.SliceStable(inv.Messages, func(i, j int) bool {
		a, b := inv.Messages[i], inv.Messages[j]
		if ra, rb := rank[a.Versions[0]], rank[b.Versions[0]]; ra != rb {
			return ra < rb
		}
		return a.Line < b.Line
	})
}

// Drop removes a version from the inventory, with the entries only it printed.
func (inv *Inventory) Drop(version string) error {
	if inv.version(version) == nil {
		return fmt.Errorf("%s: no version %q", inv.Name(), version)
	}
	vers := inv.Versions[:0]
	for _, v := range inv.Versions {
		if v.Version != version {
			vers = append(vers, v)
		}
	}
	inv.Versions = vers
	kept := inv.Messages[:0]
	for _, m := range inv.Messages {
		if m.Versions = without(m.Versions, version); len(m.Versions) > 0 {
			kept = append(kept, m)
		}
	}
	inv.Messages = kept
	return nil
}

func without(list []string, s string) []string {
	out := list[:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
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
	head := "# Messages of " + inv.Name() + " in every version listed, extracted by\n" +
		"# rules/sources/extract; each is covered by a rule or ignored with a reason.\n"
	// A file listed by hand (a closed program's quoted messages, macros the
	// extractor does not read) says so in its header: a refresh keeps it.
	if old, err := os.ReadFile(p); err == nil {
		if h := leadingComments(old); h != "" {
			head = h
		}
	}
	if err := os.WriteFile(p, append([]byte(head), data...), 0o644); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	return nil
}

// leadingComments returns the comment lines a file starts with, line ends included.
func leadingComments(b []byte) string {
	n := 0
	for n < len(b) && b[n] == '#' {
		end := bytes.IndexByte(b[n:], '\n')
		if end < 0 {
			return string(b) + "\n"
		}
		n += end + 1
	}
	return string(b[:n])
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
	quoted := func(v string) *yaml.Node {
		n := str(v)
		n.Style = yaml.DoubleQuotedStyle
		return n
	}
	vers := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, v := range inv.Versions {
		// A prefix keeps its quotes (a trailing space is part of it). Styled on the
		// node itself: mapping drops empty fields, so a position would shift when
		// "from" is empty.
		prefix := str(v.Prefix)
		if v.Prefix != "" {
			prefix.Style = yaml.DoubleQuotedStyle
		}
		vers.Content = append(vers.Content, mapping("version", quoted(v.Version), "from", str(v.From), "prefix", prefix, "devPrefix", str(v.DevPrefix)))
	}
	msgs := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, m := range inv.Messages {
		vs := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, v := range m.Versions {
			vs.Content = append(vs.Content, quoted(v))
		}
		msgs.Content = append(msgs.Content, mapping("line", num(m.Line), "call", str(m.Call), "level", str(m.Level),
			"func", str(m.Func), "format", quoted(m.Format), "versions", vs, "rule", str(m.Rule), "ignore", str(m.Ignore)))
	}
	root := mapping("project", str(inv.Project), "file", str(inv.File), "source", str(string(inv.Source)))
	root.Content = append(root.Content, str("versions"), vers, str("messages"), msgs)
	return root
}

// Lines generates the log lines of one message (a format can span several), with
// fixed values for some conversions (nil: all generated).
func Lines(inv *Inventory, m Message, fixed map[int]string) ([]string, error) {
	prefix, devPrefix := inv.prefixes(m)
	if printf.DeviceCall(m.Call) {
		prefix = devPrefix
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
			hits = e.Match(&logstream.Line{Text: l, Source: string(inv.Source)}, hits[:0])
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

// FileCoverage is the coverage of one inventory file, every version together.
type FileCoverage struct {
	Project  string   `json:"project"`
	File     string   `json:"file"`
	Versions []string `json:"versions"`
	Counts
	// Unaccounted lists the messages neither covered nor ignored; Stale the
	// covered messages whose recorded rule is no longer among those that match.
	UnaccountedMessages []Message `json:"unaccountedMessages,omitempty"`
	Stale               []string  `json:"stale,omitempty"`
}

// VersionCoverage is the coverage of the messages one version of a project prints,
// over every file of the inventory that has that version.
type VersionCoverage struct {
	Project string `json:"project"`
	Version string `json:"version"`
	Files   int    `json:"files"`
	Counts
}

// Report is the coverage of a whole inventory. Total counts each entry once (a
// wording printed by several versions is one message); Versions counts, per
// project and version, the messages that version prints.
type Report struct {
	Sources  []FileCoverage    `json:"sources"`
	Versions []VersionCoverage `json:"versions"`
	Total    Counts            `json:"total"`
}

// Coverage classifies every message of the inventories against the engine's rules.
func Coverage(e *rules.Engine, invs []*Inventory) (*Report, error) {
	rep := &Report{}
	type pv struct{ project, version string }
	perVersion := map[pv]*VersionCoverage{}
	var order []pv
	for _, inv := range invs {
		fc := FileCoverage{Project: inv.Project, File: inv.File}
		for _, v := range inv.Versions {
			fc.Versions = append(fc.Versions, v.Version)
			k := pv{inv.Project, v.Version}
			if perVersion[k] == nil {
				perVersion[k] = &VersionCoverage{Project: inv.Project, Version: v.Version}
				order = append(order, k)
			}
			perVersion[k].Files++
		}
		for _, m := range inv.Messages {
			var c Counts
			c.Messages++
			ids, err := Classify(e, inv, m)
			if err != nil {
				return nil, err
			}
			switch {
			case len(ids) > 0:
				c.Covered++
				if m.Rule != "" && !contains(ids, m.Rule) {
					fc.Stale = append(fc.Stale, fmt.Sprintf("line %d: recorded %s, matches %s", m.Line, m.Rule, strings.Join(ids, ", ")))
				}
			case m.Ignore != "":
				c.Ignored++
			default:
				c.Unaccounted++
				fc.UnaccountedMessages = append(fc.UnaccountedMessages, m)
			}
			fc.add(c)
			for _, v := range m.Versions {
				perVersion[pv{inv.Project, v}].add(c)
			}
		}
		rep.Total.add(fc.Counts)
		rep.Sources = append(rep.Sources, fc)
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].project != order[j].project {
			return order[i].project < order[j].project
		}
		return VersionLess(order[j].version, order[i].version)
	})
	for _, k := range order {
		rep.Versions = append(rep.Versions, *perVersion[k])
	}
	return rep, nil
}

// VersionLess orders release names by their numbers (v5.10.262 < v6.1.192 <
// v6.12.117; 535.288.01 < 595.45.04; v2.29.7-1 < v2.30.7-1), text between them
// compared as text.
func VersionLess(a, b string) bool {
	for a != "" && b != "" {
		na, ra := leadingNumber(a)
		nb, rb := leadingNumber(b)
		switch {
		case na >= 0 && nb >= 0:
			if na != nb {
				return na < nb
			}
			a, b = ra, rb
		case a[0] != b[0]:
			return a[0] < b[0]
		default:
			a, b = a[1:], b[1:]
		}
	}
	return len(a) < len(b)
}

// leadingNumber parses the decimal number s starts with (-1 when none) and
// returns the rest.
func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return -1, s
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return -1, s
	}
	return n, s[i:]
}

// NewestFirst orders versions for an inventory: newest first.
func NewestFirst(a, b string) bool { return VersionLess(b, a) }

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

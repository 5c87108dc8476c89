package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
	"gopkg.in/yaml.v3"
)

// Error is a problem in a rule pack, located by file, line and column, and naming
// the pack and rule when known.
type Error struct {
	File   string
	Line   int
	Column int
	Pack   string
	Rule   string
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Pack != "" {
		fmt.Fprintf(&b, "pack %q: ", e.Pack)
	}
	if e.Rule != "" {
		fmt.Fprintf(&b, "rule %q: ", e.Rule)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a load, in file order.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// errorOrNil returns nil for an empty list, so callers can `return errs.errorOrNil()`.
func (es Errors) errorOrNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Loader loads rule packs. The zero Loader decodes and validates every field.
type Loader struct {
	// MatchingOnly leaves out what only `faultline rules test` reads: a rule's
	// tests, sources and benignSources are neither decoded nor validated. They are
	// most of a pack's text, so a matcher (scan, the controller's default packs)
	// loads in a fraction of the time; everything else is checked as strictly.
	MatchingOnly bool
	// Checked says the files were loaded by the strict decoder before and have not
	// changed since: the built-in packs, embedded in the binary and loaded strictly
	// by `make test` (rules/packs). Each document is then decoded from the nodes
	// already parsed for errors' positions, without the strict decoder's second
	// pass over the text, most of a load's time. Validation is unchanged.
	Checked bool
	// Taints is which taints the packs may ask for; the zero policy is the default
	// (TaintPolicy).
	Taints TaintPolicy
}

// ParseFile decodes the rule packs in one YAML file (documents separated by ---).
// Unknown fields are errors; every error names file:line:column and the rule.
func (l Loader) ParseFile(file string, data []byte) ([]*Pack, error) {
	if l.MatchingOnly {
		// Most of a pack's text is its rules' tests and sources: leave them out of
		// the decoding too, when the text without them proves to be the file less
		// them (see blankTestingValues).
		if text, docs, ok := withoutTestingValues(data); ok {
			return l.decode(file, text, docs, nil)
		}
	}
	docs, err := parseNodes(data)
	return l.decode(file, data, docs, err)
}

// decode decodes the pack documents of text with yaml.v3's strict decoder
// (KnownFields: an unknown field is an error) and validates them; docs are the
// same documents as nodes, for the positions of errors, and perr the error that
// ended their parsing.
func (l Loader) decode(file string, text []byte, docs []*yaml.Node, perr error) ([]*Pack, error) {
	strict := yaml.NewDecoder(bytes.NewReader(text))
	strict.KnownFields(true)
	var packs []*Pack
	var errs Errors
	for _, doc := range docs {
		p := &Pack{File: file}
		decode := strict.Decode
		if l.Checked {
			decode = doc.Decode
		}
		if err := decode(p); err != nil {
			errs = append(errs, yamlError(file, doc, err)...)
			continue
		}
		if len(doc.Content) == 0 {
			continue // an empty document
		}
		if l.MatchingOnly {
			dropTestingFields(doc)
			for i := range p.Spec.Rules {
				r := &p.Spec.Rules[i]
				r.Tests, r.Sources, r.BenignSources = nil, nil, nil
			}
		}
		errs = append(errs, validatePack(p, doc, l.Taints)...)
		packs = append(packs, p)
	}
	if perr != nil {
		errs = append(errs, yamlError(file, nil, perr)...)
		return nil, errs
	}
	if len(packs) == 0 && len(errs) == 0 {
		errs = append(errs, &Error{File: file, Msg: "no rule pack in file"})
	}
	return packs, errs.errorOrNil()
}

// parseNodes parses the documents of data into nodes, up to the first error.
func parseNodes(data []byte) ([]*yaml.Node, error) {
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		doc := new(yaml.Node)
		err := dec.Decode(doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		docs = append(docs, doc)
	}
}

var yamlLineRe = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
var yamlFieldRe = regexp.MustCompile(`field (\S+) not found in type rules\.(\w+)`)

// yamlError turns yaml.v3's messages into located Errors.
func yamlError(file string, doc *yaml.Node, err error) Errors {
	var lines []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		lines = te.Errors
	} else {
		lines = []string{err.Error()}
	}
	var out Errors
	for _, l := range lines {
		e := &Error{File: file, Msg: l}
		if m := yamlLineRe.FindStringSubmatch(l); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = m[2]
		}
		field := ""
		if m := yamlFieldRe.FindStringSubmatch(e.Msg); m != nil {
			field = m[1]
			e.Msg = fmt.Sprintf("unknown field %q in %s", m[1], typeName(m[2]))
		}
		e.Msg = strings.ReplaceAll(e.Msg, "rules.", "")
		if doc != nil && e.Line > 0 {
			e.Column = columnOf(doc, e.Line, field)
			e.Pack, e.Rule = ownerOf(doc, e.Line)
		}
		out = append(out, e)
	}
	return out
}

func typeName(t string) string {
	switch t {
	case "Pack":
		return "the pack"
	case "PackSpec":
		return "spec"
	case "PackMeta":
		return "metadata"
	case "Rule":
		return "a rule"
	}
	return strings.ToLower(t[:1]) + t[1:]
}

// columnOf finds the column of the key `field` on `line` (or of the first node on it).
func columnOf(n *yaml.Node, line int, field string) int {
	best := 0
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Line == line {
			if field != "" && n.Value == field && n.Kind == yaml.ScalarNode {
				best = n.Column
				return
			}
			if best == 0 || n.Column < best {
				if field == "" {
					best = n.Column
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	if best == 0 && field != "" {
		return columnOf(n, line, "")
	}
	return best
}

// ownerOf returns the pack name and the id of the rule whose YAML spans line.
func ownerOf(doc *yaml.Node, line int) (pack, rule string) {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if n := lookup(root, "metadata", "name"); n != nil {
		pack = n.Value
	}
	seq := lookup(root, "spec", "rules")
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return pack, ""
	}
	for i, r := range seq.Content {
		end := int(^uint(0) >> 1)
		if i+1 < len(seq.Content) {
			end = seq.Content[i+1].Line - 1
		}
		if line >= r.Line && line <= end {
			if id := lookup(r, "id"); id != nil {
				rule = id.Value
			} else {
				rule = fmt.Sprintf("#%d", i+1)
			}
		}
	}
	return pack, rule
}

// lookup walks mapping keys; it returns nil when a key is missing.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

// keyNode returns the key node for the last key, for error positions on keys.
func keyNode(n *yaml.Node, keys ...string) *yaml.Node {
	if len(keys) == 0 {
		return n
	}
	parent := lookup(n, keys[:len(keys)-1]...)
	if parent == nil || parent.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(parent.Content); i += 2 {
		if parent.Content[i].Value == keys[len(keys)-1] {
			return parent.Content[i]
		}
	}
	return nil
}

// LoadPaths loads packs, with every field, from files and directories (every *.yaml
// and *.yml file in a directory, in name order; not recursive), in the order given.
func LoadPaths(paths ...string) ([]*Pack, error) { return Loader{}.LoadPaths(paths...) }

// LoadPaths loads packs from files and directories (every *.yaml and *.yml file in
// a directory, in name order; not recursive), in the order given.
func (l Loader) LoadPaths(paths ...string) ([]*Pack, error) {
	var packs []*Pack
	var errs Errors
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("load packs: %w", err)
		}
		files := []string{p}
		if st.IsDir() {
			files, err = yamlFiles(os.DirFS(p), ".")
			if err != nil {
				return nil, fmt.Errorf("load packs from %s: %w", p, err)
			}
			for i := range files {
				files[i] = filepath.Join(p, files[i])
			}
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("load pack: %w", err)
			}
			ps, err := l.ParseFile(f, data)
			if err != nil {
				errs = appendErr(errs, err)
			}
			packs = append(packs, ps...)
		}
	}
	return packs, errs.errorOrNil()
}

// LoadFS loads every *.yaml/*.yml file in dir of fsys, in name order, with every field.
func LoadFS(fsys fs.FS, dir string) ([]*Pack, error) { return Loader{}.LoadFS(fsys, dir) }

// LoadFS loads every *.yaml/*.yml file in dir of fsys, in name order.
func (l Loader) LoadFS(fsys fs.FS, dir string) ([]*Pack, error) {
	files, err := yamlFiles(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("load packs from %s: %w", dir, err)
	}
	// Files are parsed side by side (decoding and the regexes' analysis are most of a
	// command's start) and joined in name order, so the result is the sequential one.
	type parsed struct {
		packs []*Pack
		err   error
		read  error
	}
	out := make([]parsed, len(files))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range files {
		g.Go(func() error {
			name := path.Join(dir, f)
			data, err := fs.ReadFile(fsys, name)
			if err != nil {
				out[i].read = fmt.Errorf("load pack %s: %w", name, err)
				return nil
			}
			out[i].packs, out[i].err = l.ParseFile(name, data)
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through out
	var packs []*Pack
	var errs Errors
	for _, p := range out {
		if p.read != nil {
			return nil, p.read
		}
		if p.err != nil {
			errs = appendErr(errs, p.err)
		}
		packs = append(packs, p.packs...)
	}
	return packs, errs.errorOrNil()
}

func appendErr(errs Errors, err error) Errors {
	var es Errors
	if errors.As(err, &es) {
		return append(errs, es...)
	}
	return append(errs, &Error{Msg: err.Error()})
}

func yamlFiles(fsys fs.FS, dir string) ([]string, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		// ConfigMap mounts add ..data symlinks and dot directories: skip hidden names.
		if e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

package rules

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// testingFields are the rule fields only `faultline rules test` reads.
var testingFields = map[string]bool{"tests": true, "sources": true, "benignSources": true}

// dropTestingFields removes the testingFields of every rule from a pack document.
func dropTestingFields(doc *yaml.Node) {
	for _, r := range ruleNodes(doc) {
		kept := r.Content[:0]
		for i := 0; i+1 < len(r.Content); i += 2 {
			if k := r.Content[i]; k.Kind == yaml.ScalarNode && testingFields[k.Value] {
				continue
			}
			kept = append(kept, r.Content[i], r.Content[i+1])
		}
		r.Content = kept
	}
}

// ruleNodes returns the mappings of a pack document's spec.rules.
func ruleNodes(doc *yaml.Node) []*yaml.Node {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	seq := lookup(root, "spec", "rules")
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return nil
	}
	var out []*yaml.Node
	for _, r := range seq.Content {
		if r.Kind == yaml.MappingNode {
			out = append(out, r)
		}
	}
	return out
}

// cut is a key whose block value blankTestingValues blanked: its line and column.
type cut struct{ line, column int }

// blankTestingValues returns data with the block value of every key line
// `tests:`, `sources:` and `benignSources:` (alone on its line) blanked: its lines
// become empty, so the key reads as null and every other line keeps its number. A
// block value is the lines after the key that are indented more than it, sequence
// entries at its indentation, and blank and comment lines among them. cuts are the
// keys, nil when there are none. A line that only looks like such a key (inside a
// block scalar, a flow collection, a mapping other than a rule) is caught by
// cutsAreRuleKeys.
func blankTestingValues(data []byte) (text []byte, cuts []cut) {
	out := make([]byte, 0, len(data))
	in := -1 // indentation of the key whose value is being blanked; -1: none
	for lineNo, rest := 1, data; len(rest) > 0; lineNo++ {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		body := bytes.TrimLeft(line, " ")
		indent := len(line) - len(body)
		content := bytes.TrimRight(body, " \t\r\n")
		if in >= 0 {
			entry := indent == in && len(content) > 0 && content[0] == '-' &&
				(len(content) == 1 || content[1] == ' ' || content[1] == '\t')
			if len(content) == 0 || content[0] == '#' || indent > in || entry {
				if line[len(line)-1] == '\n' {
					out = append(out, '\n')
				}
				continue
			}
			in = -1
		}
		if testingKeyLine(content) {
			cuts = append(cuts, cut{line: lineNo, column: indent + 1})
			in = indent
		}
		out = append(out, line...)
	}
	return out, cuts
}

// testingKeyLine reports whether a line's content (without its indentation) is one
// of the testingFields as a key with nothing but a comment after it.
func testingKeyLine(content []byte) bool {
	key, rest, ok := bytes.Cut(content, []byte(":"))
	if !ok || !testingFields[string(key)] {
		return false
	}
	after := bytes.TrimLeft(rest, " \t")
	return len(after) == 0 || (len(after) < len(rest) && after[0] == '#')
}

// withoutTestingValues returns data with its rules' testing values blanked
// (blankTestingValues) and its documents as nodes; ok is false when there are
// none, or when the blanked text is not the file less those values.
func withoutTestingValues(data []byte) (text []byte, docs []*yaml.Node, ok bool) {
	text, cuts := blankTestingValues(data)
	if cuts == nil {
		return nil, nil, false
	}
	docs, err := parseNodes(text)
	if err != nil || !cutsAreRuleKeys(docs, cuts) {
		return nil, nil, false
	}
	return text, docs, true
}

// cutsAreRuleKeys reports whether every cut is a testing field of a rule, with the
// null value the blanking left it: then the blanked text is the file less those
// values, since the text before each cut is the file's and a block value ends
// where the blanking ended it.
func cutsAreRuleKeys(docs []*yaml.Node, cuts []cut) bool {
	keys := map[cut]bool{}
	for _, doc := range docs {
		for _, r := range ruleNodes(doc) {
			for i := 0; i+1 < len(r.Content); i += 2 {
				k, v := r.Content[i], r.Content[i+1]
				if k.Kind == yaml.ScalarNode && testingFields[k.Value] && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" && v.Value == "" {
					keys[cut{line: k.Line, column: k.Column}] = true
				}
			}
		}
	}
	for _, c := range cuts {
		if !keys[c] {
			return false
		}
	}
	return true
}

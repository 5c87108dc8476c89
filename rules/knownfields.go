package rules

import (
	"reflect"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// knownFieldsOnly reports whether every mapping key under n names a field of t, so
// that decoding n into a t with Node.Decode gives what yaml.v3's strict decoder
// (KnownFields) gives, from one tokenisation of the file instead of two. It is
// conservative: aliases of collections, merge keys, non-string keys and inline fields make it say
// false, and the caller then decodes with the strict decoder, whose messages stay
// the reference.
func knownFieldsOnly(n *yaml.Node, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.AliasNode:
		// A scalar has no keys (the packs share regexes so); an alias of a
		// collection is left to the strict decoder, which also guards recursion.
		return n.Alias != nil && n.Alias.Kind == yaml.ScalarNode
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if !knownFieldsOnly(c, t) {
				return false
			}
		}
		return true
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return true // the type checks its own keys (see Recover)
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return true // a type error, which Node.Decode reports as the strict decoder does
		}
		fields, ok := yamlFields(t)
		if !ok {
			return false
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return false
			}
			ft, ok := fields[k.Value]
			if !ok || !knownFieldsOnly(n.Content[i+1], ft) {
				return false
			}
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				if !knownFieldsOnly(c, t.Elem()) {
					return false
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Kind == yaml.AliasNode || !knownFieldsOnly(n.Content[i+1], t.Elem()) {
					return false
				}
			}
		}
	}
	return true
}

var (
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	fieldCache      sync.Map // reflect.Type -> map[string]reflect.Type, or nil when unsupported
)

// yamlFields maps the YAML keys of struct t to their field types, as yaml.v3 names
// them: the tag's name, or the lower-cased field name; "-" and unexported fields are
// no keys. ok is false for inline fields, which knownFieldsOnly does not follow.
func yamlFields(t reflect.Type) (map[string]reflect.Type, bool) {
	if v, ok := fieldCache.Load(t); ok {
		m := v.(map[string]reflect.Type)
		return m, m != nil
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.PkgPath != "" && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" && !strings.Contains(string(f.Tag), ":") {
			tag = string(f.Tag)
		}
		name, flags, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous || strings.Contains(flags, "inline") {
			m = nil
			break
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m, m != nil
}

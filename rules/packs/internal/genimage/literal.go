package main

import (
	"cmp"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// literal writes a Go value as the Go expression that builds it. It walks the value
// by reflection, so a field added to the pack types needs no change here. Fields
// left at their zero value are left out; nil and empty slices and maps stay
// apart. Unexported fields are left out: they are what rules.Image.Load derives.
type literal struct {
	b    strings.Builder
	pkgs map[string]bool
}

func newLiteral() *literal { return &literal{pkgs: map[string]bool{}} }

// of returns the expression of v.
func (l *literal) of(v any) (s string, err error) {
	l.b.Reset()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write the image: %v", r)
		}
	}()
	l.value(reflect.ValueOf(v), false)
	return l.b.String(), nil
}

// imports are the packages of the types written, sorted.
func (l *literal) imports() []string {
	out := make([]string, 0, len(l.pkgs))
	for p := range l.pkgs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// value writes v; typed says the type is known from the context (an element of a
// slice or map), where Go lets a composite literal leave it out.
func (l *literal) value(v reflect.Value, typed bool) {
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer:
		switch {
		case v.IsNil():
			l.b.WriteString("nil")
		case t.Elem().Kind() == reflect.Struct:
			if !typed {
				l.b.WriteString("&")
			}
			l.value(v.Elem(), typed)
		default: // the value's type is the type argument

			fmt.Fprintf(&l.b, "ptr[%s](", l.typeName(t.Elem()))
			l.basic(v.Elem())
			l.b.WriteString(")")
		}
	case reflect.Struct:
		if !typed {
			l.b.WriteString(l.typeName(t))
		}
		l.b.WriteString("{")
		open := false
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || v.Field(i).IsZero() {
				continue
			}
			if !open {
				l.b.WriteString("\n")
				open = true
			}
			fmt.Fprintf(&l.b, "%s: ", f.Name)
			l.value(v.Field(i), false)
			l.b.WriteString(",\n")
		}
		l.b.WriteString("}")
	case reflect.Slice:
		if v.IsNil() {
			l.b.WriteString("nil")
			return
		}
		l.b.WriteString(l.typeName(t) + "{")
		if v.Len() > 0 {
			l.b.WriteString("\n")
		}
		for i := range v.Len() {
			l.value(v.Index(i), true)
			l.b.WriteString(",\n")
		}
		l.b.WriteString("}")
	case reflect.Map:
		if v.IsNil() {
			l.b.WriteString("nil")
			return
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, compareKeys)
		l.b.WriteString(l.typeName(t) + "{")
		if len(keys) > 0 {
			l.b.WriteString("\n")
		}
		for _, k := range keys {
			l.value(k, true)
			l.b.WriteString(": ")
			l.value(v.MapIndex(k), true)
			l.b.WriteString(",\n")
		}
		l.b.WriteString("}")
	default:
		l.basic(v)
	}
}

// basic writes a string, bool or number as an untyped constant: wherever the
// generated code puts one (a field, an element, a key, ptr's argument), its type
// is known.
func (l *literal) basic(v reflect.Value) {
	var s string
	switch v.Kind() {
	case reflect.String:
		s = strconv.Quote(v.String())
		if strconv.CanBackquote(v.String()) && strings.Contains(v.String(), `\`) {
			s = "`" + v.String() + "`" // regexes read as written
		}
	case reflect.Bool:
		s = strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s = strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s = strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		s = strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		panic(fmt.Sprintf("no Go literal for a value of type %s", v.Type()))
	}
	l.b.WriteString(s)
}

// compareKeys orders map keys: strings and numbers by value.
func compareKeys(a, b reflect.Value) int {
	switch a.Kind() {
	case reflect.String:
		return cmp.Compare(a.String(), b.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return cmp.Compare(a.Int(), b.Int())
	}
	panic(fmt.Sprintf("no order of map keys of type %s", a.Type()))
}

// typeName is t as written in the generated file, its package imported.
func (l *literal) typeName(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() == "" {
			return t.Name()
		}
		l.pkgs[t.PkgPath()] = true
		return path.Base(t.PkgPath()) + "." + t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + l.typeName(t.Elem())
	case reflect.Slice:
		return "[]" + l.typeName(t.Elem())
	case reflect.Map:
		return "map[" + l.typeName(t.Key()) + "]" + l.typeName(t.Elem())
	}
	panic(fmt.Sprintf("no Go name for type %s", t))
}

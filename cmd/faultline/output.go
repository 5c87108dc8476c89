package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// outputFormat is the value of the -o/--output flag the commands that print a
// structured result share: text for operators (the default), json or yaml for
// scripts. The json and yaml forms carry the same object.
type outputFormat string

const (
	outputText outputFormat = "text"
	outputJSON outputFormat = "json"
	outputYAML outputFormat = "yaml"
)

// addOutputFlag registers -o/--output on fs, writing into o (text by default).
func addOutputFlag(fs *pflag.FlagSet, o *outputFormat) {
	*o = outputText
	fs.VarP(o, "output", "o", "output format: text, json or yaml")
}

// Set implements pflag.Value; "table" is kept as another name for text, the
// probe commands' former default.
func (o *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case outputText, "table":
		*o = outputText
	case outputJSON, outputYAML:
		*o = outputFormat(s)
	default:
		return fmt.Errorf("%q: want text, json or yaml", s)
	}
	return nil
}

func (o *outputFormat) String() string { return string(*o) }

// Type implements pflag.Value.
func (*outputFormat) Type() string { return "format" }

// print writes v as JSON or YAML, or calls text for the human form.
func (o outputFormat) print(w io.Writer, v any, text func(io.Writer) error) error {
	switch o {
	case outputJSON:
		return printJSON(w, v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("yaml output: %w", err)
		}
		_, err = w.Write(b)
		return err
	default:
		return text(w)
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Package packs embeds the default rule packs shipped with faultline, so the binary
// works with no pack directory (`faultline scan` without --packs).
package packs

import (
	"embed"

	"github.com/faultline-dev/faultline/rules"
)

// FS holds the default packs (*.yaml in this directory).
//
//go:embed *.yaml
var FS embed.FS

// Load parses the default packs, in file name order.
func Load() ([]*rules.Pack, error) {
	return rules.LoadFS(FS, ".")
}

// Engine compiles the default packs into a matcher.
func Engine() (*rules.Engine, error) {
	ps, err := Load()
	if err != nil {
		return nil, err
	}
	set, err := rules.Compile(ps)
	if err != nil {
		return nil, err
	}
	return rules.NewEngine(set), nil
}

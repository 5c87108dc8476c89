// Package packs embeds the default rule packs shipped with faultline, so the binary
// works with no pack directory (`faultline scan` without --packs).
package packs

import (
	"embed"
	"fmt"
	"sync"

	"github.com/faultline-dev/faultline/rules"
)

//go:generate go run ./internal/genimage

// FS holds the default packs (*.yaml in this directory).
//
//go:embed *.yaml
var FS embed.FS

// Load parses the default packs, in file name order, with every field.
func Load() ([]*rules.Pack, error) {
	return rules.LoadFS(FS, ".")
}

// matching is how the default packs load for a matcher: without the rules' tests
// and sources, which `make test` runs and validates, from files `make test` checks.
var matching = rules.Loader{MatchingOnly: true, Checked: true}

// LoadForMatching loads the default packs for a matcher (see matching): from their
// compiled image (zz_generated.image.go, `go generate ./rules/packs`), which holds
// them as that load leaves them, while it is the image of the embedded files; else
// (a pack edited since) by parsing the files, correct but slower, and a test fails
// until the image is generated again.
func LoadForMatching() ([]*rules.Pack, error) {
	if imageCurrent() {
		if ps, err := image.Load(); err == nil {
			return ps, nil
		}
	}
	return matching.LoadFS(FS, ".")
}

// imageCurrent reports whether the compiled image was made of the embedded files.
var imageCurrent = sync.OnceValue(func() bool {
	d, err := rules.FilesDigest(FS, ".")
	return err == nil && d == imageDigest
})

// Layered loads a pack set the way every command layers it: the default packs
// first (when defaults, loaded with builtin; from their compiled image when builtin
// is the load for matching, see LoadForMatching), then each of paths in order
// (loaded with given). rules.Compile then lets a later rule override an earlier one of the
// same id. The default packs and the given ones come back apart, so that a caller
// can tell an operator's rules from the built-in ones.
func Layered(defaults bool, builtin, given rules.Loader, paths ...string) (defaultPacks, givenPacks []*rules.Pack, err error) {
	if defaults {
		load := func() ([]*rules.Pack, error) { return builtin.LoadFS(FS, ".") }
		// The image is the matching load of the built-in packs; their taints pass
		// every taint policy (TestBuiltinTaintsPassEveryPolicy), so builtin's policy
		// needs no second look.
		if builtin.MatchingOnly && builtin.Checked {
			load = LoadForMatching
		}
		if defaultPacks, err = load(); err != nil {
			return nil, nil, fmt.Errorf("default packs: %w", err)
		}
	}
	if len(paths) > 0 {
		if givenPacks, err = given.LoadPaths(paths...); err != nil {
			return nil, nil, err
		}
	}
	return defaultPacks, givenPacks, nil
}

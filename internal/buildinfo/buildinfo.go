// Package buildinfo says which build of faultline a program is: the module version and
// the VCS revision the Go toolchain records in every binary (runtime/debug), so that
// `go build`, `go install` and `make build` report the same without linker flags.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version is the main module's version ("v1.2.0", or a pseudo-version such as
// "v0.0.0-20250102150405-abcdef123456+dirty" built from a checkout), or "devel" and
// the VCS revision when the toolchain recorded no version (a test binary, a build
// outside a checkout gives "devel"). It has no spaces: it also goes into User-Agent.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return version(info)
}

func version(info *debug.BuildInfo) string {
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := info.Main.Version
	if v != "" && v != "(devel)" {
		if rev != "" && !strings.Contains(v, rev) {
			v += "-" + rev
		}
		return v
	}
	v = "devel"
	if rev != "" {
		v += "-" + rev
		if modified == "true" {
			v += "-dirty"
		}
	}
	return v
}

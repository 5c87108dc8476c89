package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersion(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "4439072abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.0", nil, "v1.2.0"},
		{"v0.0.0-20250102150405-4439072abcde+dirty", rev, "v0.0.0-20250102150405-4439072abcde+dirty"},
		{"v1.2.0", rev, "v1.2.0-4439072abcde"},
		{"(devel)", rev, "devel-4439072abcde-dirty"},
		{"(devel)", rev[:1], "devel-4439072abcde"},
		{"", nil, "devel"},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Version: c.main}, Settings: c.settings}
		if got := version(info); got != c.want {
			t.Errorf("version(%q, %v) = %q, want %q", c.main, c.settings, got, c.want)
		}
	}
	if Version() == "" {
		t.Error("Version() is empty")
	}
}

package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func rssFileKB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// The executable's read-only pages leave the resident set, and the process keeps
// running the code it needs (they fault back in from the page cache).
func TestReleaseStartupPages(t *testing.T) {
	before := rssFileKB(t)
	n, err := releaseStartupPages()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKB(t)
	t.Logf("unmapped %d MiB of mappings; file-backed RSS %d kB -> %d kB", n>>20, before, after)
	if n <= 0 {
		t.Fatal("no mapping of the executable found")
	}
	if after >= before {
		t.Errorf("file-backed RSS did not shrink: %d kB -> %d kB", before, after)
	}
	if got := newRoot().Name(); got != "faultline" {
		t.Errorf("root command after release: %q", got)
	}
}

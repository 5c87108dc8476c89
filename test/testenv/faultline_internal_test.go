package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The binaries the tests build and measure are built as the Makefile's release
// build: a flag changed there and not here would have the tests measure another
// binary than the image's.
func TestReleaseFlagsAreTheMakefiles(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RELEASE_FLAGS\s*:?=\s*(.+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no RELEASE_FLAGS in the Makefile")
	}
	// The Makefile's shell words: -ldflags='-s -w' is one argument.
	var words []string
	for _, w := range regexp.MustCompile(`\S+='[^']*'|\S+`).FindAllString(strings.TrimSpace(string(m[1])), -1) {
		words = append(words, strings.ReplaceAll(w, "'", ""))
	}
	if !slices.Equal(words, releaseFlags) {
		t.Errorf("the Makefile's RELEASE_FLAGS are %q, the tests build with %q", words, releaseFlags)
	}
}

// RSSParts reads the three figures of one process at once; the parts add up.
func TestRSSParts(t *testing.T) {
	rss, anon, file := RSSParts(os.Getpid())
	if rss <= 0 || anon <= 0 || file <= 0 {
		t.Fatalf("VmRSS %d, RssAnon %d, RssFile %d bytes: want each above 0", rss, anon, file)
	}
	if anon+file > rss || rss-(anon+file) > rss/4 {
		t.Errorf("RssAnon %d + RssFile %d bytes, VmRSS %d: the parts should make up the whole (RssShmem aside)", anon, file, rss)
	}
	if r, _, _ := RSSParts(1 << 30); r != 0 {
		t.Errorf("a process that does not exist: VmRSS %d, want 0", r)
	}
}

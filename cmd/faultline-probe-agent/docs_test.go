package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/test/clidoc"
	"github.com/faultline-dev/faultline/test/markdown"
)

// Every faultline-probe-agent command line the README and docs/ show in their code
// blocks has flags the agent has; the README's table of commands gives the port of
// its --listen.
func TestDocCommandLines(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range append(files, filepath.Join("..", "..", "README.md")) {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range markdown.Commands(f, md, "faultline-probe-agent") {
			n++
			if err := clidoc.Check(newRoot(), c.Args[1:]); err != nil {
				t.Errorf("%s:%d: %s: %v", c.File, c.Line, c, err)
			}
		}
		if filepath.Base(f) != "README.md" {
			continue
		}
		m := regexp.MustCompile("(?m)^\\| `faultline-probe-agent` \\|[^|]*:(\\d{4})\\b").FindSubmatch(md)
		if m == nil {
			t.Errorf("README's table of commands gives no port for faultline-probe-agent")
			continue
		}
		if l := newRoot().Flags().Lookup("listen"); l == nil || !strings.HasSuffix(l.DefValue, ":"+string(m[1])) {
			t.Errorf("README says faultline-probe-agent serves on :%s; its --listen is %+v", m[1], l)
		}
	}
	if n == 0 {
		t.Error("found no faultline-probe-agent command line in the docs; the parser lost them")
	}
}

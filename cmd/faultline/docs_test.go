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

// docs are the README and docs/*.md, by their path from the repository's root.
func docs(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range append(files, filepath.Join("..", "..", "README.md")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(filepath.ToSlash(f), "../../")] = b
	}
	return out
}

// Every faultline command line the README and docs/ show in their code blocks names
// a command that runs, with flags it has and as many arguments as it takes.
func TestDocCommandLines(t *testing.T) {
	n := 0
	for file, md := range docs(t) {
		for _, c := range markdown.Commands(file, md, "faultline") {
			n++
			if err := clidoc.Check(newRoot(), c.Args[1:]); err != nil {
				t.Errorf("%s:%d: %s: %v", c.File, c.Line, c, err)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d faultline command lines in the docs; the parser lost them", n)
	}
}

// The README's table of commands says on which port each serves: the default of its
// --listen.
func TestReadmePorts(t *testing.T) {
	readme := docs(t)["README.md"]
	row := regexp.MustCompile("(?m)^\\| `faultline ([a-z-]+)` \\|([^|]*)\\|")
	port := regexp.MustCompile(`:(\d{4})\b`)
	n := 0
	for _, m := range row.FindAllSubmatch(readme, -1) {
		p := port.FindSubmatch(m[2])
		if p == nil {
			continue
		}
		n++
		cmd, _, err := newRoot().Find([]string{string(m[1])})
		if err != nil {
			t.Errorf("README's command %s: %v", m[1], err)
			continue
		}
		f := cmd.Flags().Lookup("listen")
		if f == nil || !strings.HasSuffix(f.DefValue, ":"+string(p[1])) {
			t.Errorf("README says faultline %s serves on :%s; its --listen is %+v", m[1], p[1], f)
		}
	}
	if n != 2 {
		t.Errorf("README's table of commands names %d ports of faultline's commands, want 2 (controller, dmesg-exporter)", n)
	}
}

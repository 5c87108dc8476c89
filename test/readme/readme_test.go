package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/test/markdown"
)

const root = "../.."

// Every metric README.md's table of metrics names is a metric name the code
// registers: a string literal of a non-test Go file (each metric's full name is
// written out where it is defined). A row's "_suffix" shorthand continues the
// "faultline_<component>_" of the name before it.
func TestReadmeMetrics(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := literals(t)
	section := string(readme)
	if i := strings.Index(section, "\n## Metrics\n"); i >= 0 {
		section = section[i:]
	}
	if i := strings.Index(section[1:], "\n## "); i >= 0 {
		section = section[:i+1]
	}
	row := regexp.MustCompile("(?m)^\\| ([^|]*`[^|]*)\\|")
	code := regexp.MustCompile("`([a-z_]+)`")
	n := 0
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		prefix := ""
		for _, c := range code.FindAllStringSubmatch(m[1], -1) {
			name := c[1]
			switch {
			case strings.HasPrefix(name, "faultline_"):
				parts := strings.SplitN(name, "_", 3)
				prefix = parts[0] + "_" + parts[1]
			case strings.HasPrefix(name, "_") && prefix != "":
				name = prefix + name
			default:
				continue
			}
			n++
			if !names[name] {
				t.Errorf("README's table of metrics names %s; no Go file defines it", name)
			}
		}
	}
	if n < 40 {
		t.Errorf("read %d metric names from README's table of metrics; the table's form changed", n)
	}
}

// literals are the string literals of the module's non-test Go files.
func literals(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every relative link of README.md and docs/*.md points to a file or directory of
// the repository.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range append(files, filepath.Join(root, "README.md")) {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdown.Links(md) {
			n++
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), l)); err != nil {
				t.Errorf("%s links to %s: %v", strings.TrimPrefix(f, root+"/"), l, err)
			}
		}
	}
	if n < 20 {
		t.Errorf("found %d relative links in the docs; the parser lost them", n)
	}
}

package chart

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/faultline-dev/faultline/test/testenv"
)

// The images `make image` builds, by Dockerfile.
var dockerfiles = []string{"Dockerfile", "Dockerfile.probe-agent"}

// The programs the images run, one per role: faultline (controller, dmesg-exporter)
// and the probe agent.
var binaries = []string{"faultline", "faultline-probe-agent"}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

type stage struct {
	name    string // AS name, or the index
	from    string // image or earlier stage
	workdir string
	instrs  []instruction
}

type dockerfile struct {
	name   string
	args   map[string]string // ARG defaults (global and per stage, last wins)
	stages []*stage
}

var varRe = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

func (d *dockerfile) expand(s string) string {
	return varRe.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		if v, ok := d.args[name]; ok {
			return v
		}
		return m
	})
}

func parseDockerfile(t testing.TB, root, name string) *dockerfile {
	t.Helper()
	d := &dockerfile{name: name, args: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, filepath.Join(root, name))))
	var cur *stage
	var buf strings.Builder
	start := 0
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if buf.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if buf.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if buf.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			buf.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		buf.WriteString(trimmed)
		full := buf.String()
		buf.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch in.cmd {
		case "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			if _, seen := d.args[k]; !seen || v != "" {
				d.args[k] = v
			}
		case "FROM":
			f := strings.Fields(d.expand(in.args))
			cur = &stage{name: strconv.Itoa(len(d.stages)), from: f[0], workdir: "/"}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				cur.name = f[2]
			}
			d.stages = append(d.stages, cur)
		case "WORKDIR":
			cur.workdir = path.Join(cur.workdir, d.expand(in.args))
		}
		if cur == nil && in.cmd != "ARG" {
			t.Fatalf("%s:%d: %s before FROM", name, in.line, in.cmd)
		}
		if cur != nil {
			cur.instrs = append(cur.instrs, in)
		}
	}
	if len(d.stages) == 0 {
		t.Fatalf("%s: no FROM", name)
	}
	return d
}

func (d *dockerfile) stage(name string) *stage {
	for _, s := range d.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (d *dockerfile) final() *stage { return d.stages[len(d.stages)-1] }

// copyArgs splits a COPY instruction into its --from (if any), sources and destination.
func (d *dockerfile) copyArgs(t testing.TB, in instruction) (from string, srcs []string, dst string) {
	t.Helper()
	f := strings.Fields(d.expand(in.args))
	for len(f) > 0 && strings.HasPrefix(f[0], "--") {
		if v, ok := strings.CutPrefix(f[0], "--from="); ok {
			from = v
		}
		f = f[1:]
	}
	if len(f) < 2 || strings.HasPrefix(f[0], "[") {
		t.Fatalf("%s:%d: COPY %s: want sources and a destination (plain form)", d.name, in.line, in.args)
	}
	return from, f[:len(f)-1], f[len(f)-1]
}

// entrypoint returns the final stage's ENTRYPOINT (JSON form required).
func (d *dockerfile) entrypoint(t testing.TB) []string {
	t.Helper()
	var ep []string
	for _, in := range d.final().instrs {
		switch in.cmd {
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &ep); err != nil {
				t.Fatalf("%s:%d: ENTRYPOINT must be a JSON array: %v", d.name, in.line, err)
			}
		case "CMD":
			t.Errorf("%s:%d: CMD in the final stage: the chart passes the arguments", d.name, in.line)
		}
	}
	if len(ep) == 0 {
		t.Fatalf("%s: no ENTRYPOINT", d.name)
	}
	return ep
}

// makeOutputs runs `make -n -B ARGS` (dry run, every target considered out of date)
// in the repository and returns the files its commands write with -o, relative to
// the directory make runs in (-C), or absolute.
func makeOutputs(t testing.TB, root string, args []string) []string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-n", "-B"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n -B %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	dir := ""
	for i, a := range args {
		if a == "-C" && i+1 < len(args) {
			dir = args[i+1]
		} else if v, ok := strings.CutPrefix(a, "-C"); ok && v != "" {
			dir = v
		}
	}
	var outs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-o" {
				p := f[i+1]
				if !path.IsAbs(p) {
					p = path.Join(dir, p)
				}
				outs = append(outs, p)
			}
		}
	}
	return outs
}

// makeRuns returns the argument lists of the make commands a RUN instruction runs.
func makeRuns(run string) [][]string {
	var out [][]string
	for _, part := range regexp.MustCompile(`&&|;|\|\|`).Split(run, -1) {
		f := strings.Fields(part)
		for len(f) > 0 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-") {
			f = f[1:] // VAR=value before the command
		}
		if len(f) > 0 && f[0] == "make" {
			out = append(out, f[1:])
		}
	}
	return out
}

// gitFiles lists the files git tracks.
func gitFiles(t testing.TB, root string) map[string]bool {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files[f] = true
		}
	}
	return files
}

// dockerignore is .dockerignore: root-anchored patterns (filepath.Match syntax,
// matching a path or any directory above it) and !exceptions, last match wins.
type dockerignore []string

func loadDockerignore(t testing.TB, root string) dockerignore {
	t.Helper()
	var pats dockerignore
	for _, l := range strings.Split(string(readFile(t, filepath.Join(root, ".dockerignore"))), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.Contains(l, "**") {
			t.Fatalf(".dockerignore: %q: ** is not understood by this test; extend dockerignore.excluded", l)
		}
		pats = append(pats, l)
	}
	return pats
}

func (d dockerignore) excluded(p string) bool {
	excluded := false
	for _, pat := range d {
		neg := strings.HasPrefix(pat, "!")
		pat = path.Clean(strings.TrimPrefix(strings.TrimPrefix(pat, "!"), "/"))
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if ok, _ := path.Match(pat, q); ok {
				excluded = !neg
				break
			}
		}
	}
	return excluded
}

// TestDockerfiles checks the Dockerfiles without a container engine: pinned base
// images, a Go new enough for go.mod, every file COPY takes from the build context
// tracked by git and not excluded by .dockerignore, every file COPY takes from a
// build stage written by the make commands that stage runs, a non-root user, and an
// ENTRYPOINT that runs the binary the stage copied.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	git := gitFiles(t, root)
	ignore := loadDockerignore(t, root)
	goMod := goModVersion(t, root)
	for _, name := range dockerfiles {
		t.Run(name, func(t *testing.T) {
			d := parseDockerfile(t, root, name)
			for _, s := range d.stages {
				if d.stage(s.from) != nil {
					continue
				}
				repo, tag, ok := strings.Cut(s.from[strings.LastIndex(s.from, "/")+1:], ":")
				if !ok || tag == "" || tag == "latest" || strings.Contains(tag, "$") {
					t.Errorf("stage %s: base image %s is not pinned to a tag", s.name, s.from)
				}
				if repo == "golang" {
					v, _, _ := strings.Cut(tag, "-")
					if versionLess(v, goMod) {
						t.Errorf("stage %s: Go %s is older than go.mod's go %s (GOTOOLCHAIN=local)", s.name, v, goMod)
					}
				}
			}
			for _, s := range d.stages {
				for _, in := range s.instrs {
					if in.cmd == "ADD" {
						t.Errorf("%s:%d: use COPY", name, in.line)
					}
					if in.cmd != "COPY" {
						continue
					}
					from, srcs, _ := d.copyArgs(t, in)
					if from == "" {
						for _, src := range srcs {
							checkContextSource(t, name, in.line, src, git, ignore)
						}
						continue
					}
					fs := d.stage(from)
					if fs == nil || !stageBuilds(fs) {
						continue // an image's own files (e.g. the Go toolchain)
					}
					made := stageMade(t, root, fs)
					for _, src := range srcs {
						if !contains(made, path.Clean(src)) {
							t.Errorf("%s:%d: COPY --from=%s %s: no make command of stage %s writes it (they write %v)",
								name, in.line, from, src, from, made)
						}
					}
				}
			}
			final := d.final()
			user := ""
			for _, in := range final.instrs {
				if in.cmd == "USER" {
					user = in.args
				}
			}
			if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
				t.Errorf("the final stage runs as %q, want a non-root user", user)
			}
			ep := d.entrypoint(t)
			bin := path.Base(ep[0])
			if !contains(binaries, bin) {
				t.Fatalf("ENTRYPOINT runs %s, none of %v", ep[0], binaries)
			}
			if dst := copiedBinary(t, d, final, bin); dst != ep[0] {
				t.Errorf("ENTRYPOINT runs %s, but the %s binary is copied to %s", ep[0], bin, dst)
			}
			switch cgo := builtWithCgo(t, root, d, bin); {
			case bin == "faultline-probe-agent" && !cgo:
				t.Error("the probe agent is built with CGO_ENABLED=0: its NVML probe would only ever report that NVML is missing")
			case bin == "faultline" && cgo:
				t.Error("faultline is built with cgo: the distroless static image has no libc")
			}
		})
	}
}

// builtWithCgo reports whether the make command that writes the binary bin the final
// stage copies leaves cgo on (the Makefile exports CGO_ENABLED=1 by default).
func builtWithCgo(t testing.TB, root string, d *dockerfile, bin string) bool {
	t.Helper()
	for _, in := range d.final().instrs {
		if in.cmd != "COPY" {
			continue
		}
		from, srcs, _ := d.copyArgs(t, in)
		fs := d.stage(from)
		if fs == nil || len(srcs) != 1 || path.Base(srcs[0]) != bin {
			continue
		}
		for _, run := range fs.instrs {
			if run.cmd != "RUN" {
				continue
			}
			for _, args := range makeRuns(run.args) {
				cmd := exec.Command("make", append([]string{"-n", "-B"}, args...)...)
				cmd.Dir = root
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("make -n -B %v: %v\n%s", args, err, out)
				}
				for _, line := range strings.Split(string(out), "\n") {
					if strings.Contains(line, "-o "+strings.TrimPrefix(srcs[0], fs.workdir+"/")) {
						return !strings.Contains(line, "CGO_ENABLED=0")
					}
				}
			}
		}
	}
	t.Fatalf("%s: cannot find the make command that builds the copied %s", d.name, bin)
	return false
}

// stageBuilds reports whether a stage builds from the context (COPY without --from).
func stageBuilds(s *stage) bool {
	for _, in := range s.instrs {
		if in.cmd == "COPY" && !strings.Contains(in.args, "--from=") {
			return true
		}
	}
	return false
}

// stageMade returns the files a build stage's make commands write, absolute.
func stageMade(t testing.TB, root string, s *stage) []string {
	t.Helper()
	var made []string
	for _, in := range s.instrs {
		if in.cmd != "RUN" {
			continue
		}
		for _, args := range makeRuns(in.args) {
			for _, o := range makeOutputs(t, root, args) {
				if !path.IsAbs(o) {
					o = path.Join(s.workdir, o)
				}
				made = append(made, o)
			}
		}
	}
	return made
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// copiedBinary returns where the final stage puts the binary bin.
func copiedBinary(t testing.TB, d *dockerfile, final *stage, bin string) string {
	t.Helper()
	for _, in := range final.instrs {
		if in.cmd != "COPY" {
			continue
		}
		_, srcs, dst := d.copyArgs(t, in)
		for _, src := range srcs {
			if path.Base(src) == bin {
				if strings.HasSuffix(dst, "/") {
					return path.Join(dst, bin)
				}
				return dst
			}
		}
	}
	t.Fatalf("%s: the final stage copies no %s binary", d.name, bin)
	return ""
}

func checkContextSource(t *testing.T, dockerfile string, line int, src string, git map[string]bool, ignore dockerignore) {
	t.Helper()
	src = path.Clean(src)
	if src == "." {
		return // the whole context
	}
	if !git[src] {
		t.Errorf("%s:%d: COPY %s: not a file git tracks (a clean checkout has no such file)", dockerfile, line, src)
	}
	if ignore.excluded(src) {
		t.Errorf("%s:%d: COPY %s: excluded by .dockerignore", dockerfile, line, src)
	}
}

func goModVersion(t testing.TB, root string) string {
	t.Helper()
	for _, l := range strings.Split(string(readFile(t, filepath.Join(root, "go.mod"))), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no go line")
	return ""
}

// versionLess compares dotted numeric versions (1.26 < 1.26.0 is false: missing parts are 0).
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// TestDockerContext checks that .dockerignore keeps out nothing the image builds
// need: the Go files (and embedded files) of every package cmd/faultline and
// cmd/faultline-probe-agent are built from, go.mod, go.sum, the Makefiles and the CUDA
// sources.
func TestDockerContext(t *testing.T) {
	root := repoRoot(t)
	ignore := loadDockerignore(t, root)
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .CFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .HFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}{{end}}`,
		"./cmd/faultline", "./cmd/faultline-probe-agent")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	needed := []string{"go.mod", "go.sum", "Makefile", "cuda/Makefile"}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		rel, err := filepath.Rel(root, l)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("%s is outside the repository", l)
		}
		needed = append(needed, filepath.ToSlash(rel))
	}
	cu, _ := filepath.Glob(filepath.Join(root, "cuda", "*.cu"))
	ch, _ := filepath.Glob(filepath.Join(root, "cuda", "*.h"))
	for _, f := range append(cu, ch...) {
		rel, _ := filepath.Rel(root, f)
		needed = append(needed, filepath.ToSlash(rel))
	}
	if len(needed) < 50 {
		t.Fatalf("only %d files found to check", len(needed))
	}
	for _, f := range needed {
		if ignore.excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the image build needs", f)
		}
	}
	// The matcher itself: what the context must not carry.
	for _, f := range []string{".git/HEAD", "bin/faultline", "cuda/bin/dgemm", "helm/faultline/values.yaml", "manifests/faultline.yaml", "testdata/corpus",
		"test/testenv/env.go", "cmd/faultline-demo/main.go"} {
		if !ignore.excluded(f) {
			t.Errorf(".dockerignore lets %s into the build context", f)
		}
	}
}

// imageTags parses `make -n image`: the image each Dockerfile is built as.
func imageTags(t testing.TB, root string) map[string]string {
	t.Helper()
	cmd := exec.Command("make", "-n", "image")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image: %v\n%s", err, out)
	}
	tags := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		file, tag := "Dockerfile", ""
		isBuild := false
		for i := 0; i < len(f); i++ {
			switch {
			case f[i] == "build":
				isBuild = true
			case f[i] == "-f" && i+1 < len(f):
				file = f[i+1]
				i++
			case f[i] == "-t" && i+1 < len(f):
				tag = f[i+1]
				i++
			}
		}
		if isBuild && tag != "" {
			tags[file] = tag
		}
	}
	for _, d := range dockerfiles {
		if tags[d] == "" {
			t.Fatalf("make -n image builds no image from %s:\n%s", d, out)
		}
	}
	return tags
}

// TestImagesMatchChart: the chart's default images are exactly what `make image`
// tags, at the chart's appVersion.
func TestImagesMatchChart(t *testing.T) {
	root := repoRoot(t)
	tags := imageTags(t, root)
	_, appVersion := chartMeta(t)
	v := chartValues(t)
	for file, keys := range map[string][]string{
		"Dockerfile":             {"image"},
		"Dockerfile.probe-agent": {"probeAgent", "image"},
		"Dockerfile.collector":   {"collector", "image"},
	} {
		repo, _ := lookup(v, append(keys, "repository")...).(string)
		tag, _ := lookup(v, append(keys, "tag")...).(string)
		if tag == "" {
			tag = appVersion
		}
		if got := repo + ":" + tag; got != tags[file] {
			t.Errorf("the chart's %s is %s, but make image tags %s as %s", strings.Join(keys, "."), got, file, tags[file])
		}
	}
}

// TestBinaryRunsChartCommands builds the binaries the images run and checks that every
// command line the chart gives one of their containers — the image's ENTRYPOINT
// followed by the container's args, in every render case — runs a real program: for
// faultline, a real subcommand; and only flags and values it accepts (`<cmd line>
// --help` exits 0; an unknown flag or a bad value fails). The program paths given to
// the probe agent are where the image puts them.
func TestBinaryRunsChartCommands(t *testing.T) {
	testenv.Integration(t)
	root := repoRoot(t)
	built := map[string]string{"faultline": testenv.BuildFaultline(t), "faultline-probe-agent": testenv.BuildProbeAgent(t)}
	help, err := exec.Command(built["faultline"], "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	subcommands := availableCommands(string(help))

	// Which image runs which ENTRYPOINT.
	tags := imageTags(t, root)
	entrypoints := map[string][]string{} // image repository -> ENTRYPOINT
	for _, name := range dockerfiles {
		repo := tags[name][:strings.LastIndex(tags[name], ":")]
		entrypoints[repo] = parseDockerfile(t, root, name).entrypoint(t)
	}
	probeImage := parseDockerfile(t, root, "Dockerfile.probe-agent")
	probePrograms := map[string]string{} // program -> path in the image
	for _, in := range probeImage.final().instrs {
		if in.cmd == "COPY" {
			_, srcs, dst := probeImage.copyArgs(t, in)
			for _, s := range srcs {
				if strings.HasSuffix(dst, "/") {
					probePrograms[path.Base(s)] = path.Join(dst, path.Base(s))
				}
			}
		}
	}

	// The programs and faultline subcommands the images and the chart use; each must
	// exist.
	used := map[string]string{}
	for _, c := range cases {
		objs := parse(t, render(t, c))
		for name, tmpl := range podTemplates(t, objs) {
			for _, ct := range tmpl.Spec.Containers {
				repo := ct.Image[:strings.LastIndex(ct.Image, ":")]
				ep, ours := entrypoints[repo]
				if !ours {
					continue
				}
				argv := append(append([]string{}, ep...), ct.Args...)
				if len(ct.Command) > 0 {
					argv = append(append([]string{}, ct.Command...), ct.Args...)
				}
				prog := path.Base(argv[0])
				bin, ok := built[prog]
				if !ok {
					t.Errorf("%s %s/%s: runs %s, none of %v", c.name, name, ct.Name, argv[0], binaries)
					continue
				}
				role := prog
				if prog == "faultline" {
					if len(argv) < 2 || strings.HasPrefix(argv[1], "-") {
						t.Errorf("%s %s/%s: %v names no subcommand", c.name, name, ct.Name, argv)
						continue
					}
					role = argv[1]
					if !subcommands[role] {
						used[role] = fmt.Sprintf("%s (%s)", name, c.name)
						continue // reported below, once
					}
				}
				used[role] = fmt.Sprintf("%s (%s)", name, c.name)
				args := expandEnv(t, &ct, argv[1:])
				out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
				if err != nil || !bytes.Contains(out, []byte("Usage:")) {
					t.Errorf("%s %s/%s: %s %s rejects the chart's command line: %v\n%s", c.name, name, ct.Name, prog, strings.Join(args, " "), err, out)
				}
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, "--command="); ok {
						prog, p, _ := strings.Cut(v, "=")
						if want, ok := probePrograms[prog]; ok && p != want {
							t.Errorf("%s: --command %s=%s, but the image puts %s at %s", c.name, prog, p, prog, want)
						}
					}
				}
			}
		}
	}
	var names []string
	for role := range used {
		names = append(names, role)
	}
	sort.Strings(names)
	for _, role := range names {
		if _, program := built[role]; !program && !subcommands[role] {
			t.Errorf("faultline has no subcommand %q, which %s runs (faultline --help lists %v)", role, used[role], keys(subcommands))
		}
	}
	for _, want := range []string{"controller", "dmesg-exporter", "faultline-probe-agent"} {
		if used[want] == "" {
			t.Errorf("no chart container runs %s", want)
		}
	}
	if probePrograms["pciebw"] == "" || probePrograms["dgemm"] == "" {
		t.Errorf("the probe-agent image does not copy pciebw and dgemm into a directory: %v", probePrograms)
	}
}

// availableCommands parses the "Available Commands:" section of cobra's help.
func availableCommands(help string) map[string]bool {
	out := map[string]bool{}
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(l, "Available Commands:"):
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in:
			if f := strings.Fields(l); len(f) > 0 {
				out[f[0]] = true
			}
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// expandEnv replaces $(VAR) as the kubelet does, with a stand-in for values that only
// exist at run time (the downward API).
func expandEnv(t testing.TB, c *corev1.Container, args []string) []string {
	t.Helper()
	vals := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			vals[e.Name] = "stand-in-" + strings.ToLower(e.Name)
		} else {
			vals[e.Name] = e.Value
		}
	}
	re := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = re.ReplaceAllStringFunc(a, func(m string) string {
			name := m[2 : len(m)-1]
			v, ok := vals[name]
			if !ok {
				t.Errorf("%s: %s refers to $(%s), which the container does not define", c.Name, a, name)
			}
			return v
		})
	}
	return out
}

package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// ToolsPathEnv names the environment variable holding the colon-separated directories
// that contain the component binaries (what `test/tools/build.sh path` prints).
const ToolsPathEnv = "FAULTLINE_TOOLS_PATH"

// modulePath identifies the repository root (its go.mod declares this module).
const modulePath = "github.com/faultline-dev/faultline"

// componentOf maps a binary to the test/tools/build.sh component that provides it.
var componentOf = map[string]string{
	"kube-apiserver":          "kubernetes",
	"kube-controller-manager": "kube-controller-manager",
	"kubectl":                 "kubernetes",
	"etcd":                    "etcd",
	"loki":                    "loki",
	"otelcol-faultline":       "otelcol",
	"helm":                    "helm",
	"controller-gen":          "controller-gen",
	"kwok":                    "kwok",
	"prometheus":              "debian",
	"iperf3":                  "debian",
	"jq":                      "debian",
	"ping":                    "debian",
	"openssl":                 "debian",
	"curl":                    "debian",
}

var (
	buildMu   sync.Mutex // one build.sh run at a time per test binary (build.sh also locks)
	rootOnce  sync.Once
	rootDir   string
	rootErr   error
	toolsMu   sync.Mutex
	toolsDirs []string
)

// Binary returns the path of a component binary: kube-apiserver, kube-controller-manager,
// kubectl, etcd, loki, otelcol-faultline, helm, kwok, or a Debian tool (prometheus, iperf3, jq,
// ping). It looks in $FAULTLINE_TOOLS_PATH (or, when that is unset, in the directories
// `test/tools/build.sh path` prints), then on $PATH for Debian tools. A missing binary is
// built with `test/tools/build.sh <component>`, the same code path as `make tools`; if it
// still cannot be found the test fails. Binary never skips.
func Binary(t TB, name string) string {
	t.Helper()
	path, err := findBinary(name)
	if err == nil {
		return path
	}
	comp, ok := componentOf[name]
	if !ok {
		t.Fatalf("testenv: unknown binary %q and not found: %v", name, err)
	}
	t.Logf("testenv: %s not found (%v); running test/tools/build.sh %s", name, err, comp)
	if out, berr := runBuild(comp); berr != nil {
		t.Fatalf("testenv: %s is missing and `test/tools/build.sh %s` failed: %v\n%s", name, comp, berr, lastLines(out, 40))
	}
	path, err = findBinary(name)
	if err != nil {
		// $FAULTLINE_TOOLS_PATH may point elsewhere than the cache build.sh fills.
		if dirs, perr := buildScriptPath(); perr == nil {
			path, err = lookIn(name, dirs)
		}
	}
	if err != nil {
		t.Fatalf("testenv: %s is still missing after `test/tools/build.sh %s`: %v", name, comp, err)
	}
	return path
}

// findBinary looks name up without building anything.
func findBinary(name string) (string, error) {
	dirs, err := toolsPath()
	if err != nil {
		return "", err
	}
	return lookIn(name, dirs)
}

func lookIn(name string, dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if componentOf[name] == "debian" {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not in %s", name, strings.Join(dirs, ":"))
}

// toolsPath returns the tool directories from $FAULTLINE_TOOLS_PATH or build.sh path.
func toolsPath() ([]string, error) {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if toolsDirs != nil {
		return toolsDirs, nil
	}
	if v := os.Getenv(ToolsPathEnv); v != "" {
		toolsDirs = splitPath(v)
		return toolsDirs, nil
	}
	dirs, err := buildScriptPath()
	if err != nil {
		return nil, err
	}
	toolsDirs = dirs
	return dirs, nil
}

// buildScriptPath returns the directories `test/tools/build.sh path` prints.
func buildScriptPath() ([]string, error) {
	script, err := buildScript()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("bash", script, "path").Output()
	if err != nil {
		return nil, fmt.Errorf("%s path: %w", script, err)
	}
	return splitPath(strings.TrimSpace(string(out))), nil
}

func splitPath(v string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(v) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// runBuild runs test/tools/build.sh for one component and returns its combined output.
func runBuild(component string) ([]byte, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	script, err := buildScript()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.Command("bash", script, component)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	fmt.Fprintf(&out, "\n(build.sh %s took %s)\n", component, time.Since(start).Round(time.Second))
	return out.Bytes(), err
}

func buildScript() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "test", "tools", "build.sh"), nil
}

// RepoRoot returns the root directory of the faultline checkout the tests run from.
func RepoRoot() (string, error) {
	rootOnce.Do(func() { rootDir, rootErr = findRepoRoot() })
	return rootDir, rootErr
}

func findRepoRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if isModuleRoot(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	// Last resort: ask the go command (works from anywhere inside the module).
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			if d := filepath.Dir(gomod); isModuleRoot(d) {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("cannot find the root of module %s (looked upwards from %v)", modulePath, starts)
}

func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 2 && fs[0] == "module" {
			return strings.Trim(fs[1], `"`) == modulePath
		}
	}
	return false
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

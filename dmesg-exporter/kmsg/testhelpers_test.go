package kmsg

import (
	"os"
	"path/filepath"
	"testing"
)

// peerDir returns the directory of peer test data named by elem, below the
// folder shared/peer-tests that sits beside the repository root. When it is
// missing the test is skipped, or fails when the environment variable CI is
// "true".
func peerDir(t testing.TB, elem ...string) string {
	t.Helper()
	rel := filepath.Join(append([]string{"..", "shared", "peer-tests"}, elem...)...)
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("locating the repository root: %v", err)
	}
	dir := filepath.Join(root, rel)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		msg := "peer test data folder " + filepath.ToSlash(rel) + " (relative to the repository root) is missing: " + dir
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true requires it")
		} else {
			t.Skip(msg + "; skipping")
		}
	}
	return dir
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

func readPeerFile(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("peer test data: %v", err)
	}
	return b
}

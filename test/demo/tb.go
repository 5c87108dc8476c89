package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// runTB lets the demo use the test harness (test/testenv) outside a test: Fatal
// aborts Run through a panic it recovers, cleanups run when the demo ends.
type runTB struct {
	dir string

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	n        int
	log      *os.File
}

type fatal struct{ msg string }

func (t *runTB) Helper() {}

func (t *runTB) Logf(format string, args ...any) {
	if t.log != nil {
		fmt.Fprintf(t.log, format+"\n", args...)
	}
}

func (t *runTB) Fatal(args ...any) { t.fail(fmt.Sprint(args...)) }

func (t *runTB) Fatalf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

func (t *runTB) Skip(args ...any) { t.fail("skipped: " + fmt.Sprint(args...)) }

func (t *runTB) fail(msg string) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	t.Logf("FATAL: %s", msg)
	panic(fatal{msg})
}

func (t *runTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *runTB) TempDir() string {
	t.mu.Lock()
	t.n++
	n := t.n
	t.mu.Unlock()
	d := filepath.Join(t.dir, fmt.Sprintf("%03d", n))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func (t *runTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// cleanup runs the cleanups, last registered first, as testing does.
func (t *runTB) cleanup() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		func() {
			defer func() { _ = recover() }()
			cs[i]()
		}()
	}
}

package podlogs

// The channel form of Run, Close and Tailing serve the tests; the exporter
// uses RunFunc and stops the tailer through its context.

import (
	"context"
	"path/filepath"
)

// Run tails until ctx is done or Close is called, sending every entry to
// out. The send blocks while out is full: a slow consumer slows the reading
// down, nothing is buffered beyond a line per file. Run returns nil when
// stopped, and releases every file it opened before it returns. A Tailer
// runs once.
func (t *Tailer) Run(ctx context.Context, out chan<- Entry) error {
	return t.RunFunc(ctx, func(ctx context.Context, e Entry) error {
		select {
		case out <- e:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// Close stops a running Tailer, waits for it to return and releases its
// files. It is safe to call more than once and from any goroutine.
func (t *Tailer) Close() error {
	t.mu.Lock()
	switch t.state {
	case stateIdle:
		t.state = stateDone
		t.mu.Unlock()
		return nil
	case stateDone:
		t.mu.Unlock()
		return nil
	}
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	cancel()
	<-done
	return nil
}

// Tailing reports whether path is being tailed.
func (t *Tailer) Tailing(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.tracked[filepath.Clean(path)]
	return ok
}

package podlogs

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestStopping(t *testing.T) {
	tests := []struct {
		name string
		// run starts the tailer and stops it; it returns Run's result.
		run  func(t *testing.T, tl *Tailer, l *logFile) error
		want error
	}{
		{
			name: "cancel while blocked on a full channel",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				ctx, cancel := context.WithCancel(context.Background())
				out := make(chan Entry) // nobody reads
				done := make(chan error, 1)
				go func() { done <- tl.Run(ctx, out) }()
				l.full(msgs("m", 100)...)
				waitFor(t, "read", func() bool { return tl.Stats().Bytes > 0 })
				cancel()
				return waitErr(t, done)
			},
		},
		{
			name: "cancel while idle",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				ctx, cancel := context.WithCancel(context.Background())
				out := make(chan Entry, 10)
				done := make(chan error, 1)
				go func() { done <- tl.Run(ctx, out) }()
				l.full("m0")
				select {
				case <-out:
				case <-time.After(waitTimeout):
					t.Fatal("no entry")
				}
				cancel()
				return waitErr(t, done)
			},
		},
		{
			name: "Close from another goroutine",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				done := make(chan error, 1)
				go func() { done <- tl.Run(context.Background(), make(chan Entry)) }()
				l.full("m0")
				waitFor(t, "open", func() bool { return tl.Stats().FilesOpen == 1 })
				if err := tl.Close(); err != nil {
					t.Fatal(err)
				}
				if tl.Stats().FilesOpen != 0 {
					t.Fatal("Close returned with files open")
				}
				return waitErr(t, done)
			},
		},
		{
			name: "error from the callback",
			run: func(t *testing.T, tl *Tailer, l *logFile) error {
				l.full("m0")
				return tl.RunFunc(context.Background(), func(context.Context, Entry) error { return errStop })
			},
			want: errStop,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := newLogFile(t, containerDir(root, "ns", "pod", "uid", "c"), "0.log")
			tl, err := New(testConfig(root))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.run(t, tl, l); !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if st := tl.Stats(); st.FilesOpen != 0 || st.Files != 0 {
				t.Fatalf("after stop: %+v", st)
			}
			if err := tl.Run(context.Background(), make(chan Entry)); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Run = %v", err)
			}
			if err := tl.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return")
		return nil
	}
}

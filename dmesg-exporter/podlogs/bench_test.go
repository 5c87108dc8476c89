package podlogs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeBenchLog writes lines CRI lines of a training job's typical length;
// every partialEvery-th line is split into three partial entries (0: none).
// It returns the number of entries a tailer delivers and the file size.
func writeBenchLog(b *testing.B, path string, lines, partialEvery int) (entries int, size int64) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	ts := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range lines {
		stamp := ts.Add(time.Duration(i) * time.Microsecond).Format(time.RFC3339Nano)
		msg := fmt.Sprintf("[rank %d] step %d loss=%.4f lr=3.0e-4 grad_norm=%.3f tokens/s=%d mem=%dMiB", i%8, i, 2.5/float64(i%97+1), float64(i%13)/7, 180000+i%5000, 61000+i%900)
		if partialEvery > 0 && i%partialEvery == 0 {
			third := len(msg) / 3
			fmt.Fprintf(w, "%s stdout P %s\n%s stdout P %s\n%s stdout F %s\n", stamp, msg[:third], stamp, msg[third:2*third], stamp, msg[2*third:])
		} else {
			fmt.Fprintf(w, "%s stdout F %s\n", stamp, msg)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	return lines, fi.Size()
}

// BenchmarkTail measures how fast a Tailer reads a large file that is
// already on disk, from start to last entry, entries consumed by a
// goroutine as the exporter does (chan) or by a callback (func).
func BenchmarkTail(b *testing.B) {
	const lines = 200_000
	for _, bc := range []struct {
		name         string
		partialEvery int
		useChan      bool
	}{
		{"full-lines/chan", 0, true},
		{"full-lines/func", 0, false},
		{"partials-1in4/chan", 4, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			root := b.TempDir()
			path := filepath.Join(containerDir(root, "train", "llama-0", "uid", "worker"), "0.log")
			entries, size := writeBenchLog(b, path, lines, bc.partialEvery)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				tl, err := New(Config{Root: root, PollInterval: time.Millisecond, RescanInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				if bc.useChan {
					out := make(chan Entry, 1024)
					go func() { done <- tl.Run(ctx, out) }()
					for range entries {
						<-out
					}
				} else {
					got := 0
					all := make(chan struct{})
					go func() {
						done <- tl.RunFunc(ctx, func(context.Context, Entry) error {
							if got++; got == entries {
								close(all)
							}
							return nil
						})
					}()
					<-all
				}
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(entries)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

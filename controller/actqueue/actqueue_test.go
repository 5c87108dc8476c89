package actqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/controller/actqueue"
	"github.com/faultline-dev/faultline/test/eventually"
)

// Tasks of one key run one at a time, in order; keys run in parallel.
func TestOrderPerKeyAndParallelKeys(t *testing.T) {
	q, err := actqueue.New(8, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()

	const keys, perKey = 10, 30
	var (
		mu      sync.Mutex
		got     = map[string][]int{}
		running = map[string]bool{}
		overlap atomic.Int32 // a key run by two workers at once
		peak    atomic.Int32 // tasks running at once, all keys
		now     atomic.Int32
	)
	for i := range perKey {
		for k := range keys {
			key := fmt.Sprintf("node-%d", k)
			line := q.Begin()
			if err := q.Add(ctx, line, key, func(context.Context) actqueue.Task {
				mu.Lock()
				if running[key] {
					overlap.Add(1)
				}
				running[key] = true
				mu.Unlock()
				if n := now.Add(1); n > peak.Load() {
					peak.Store(n)
				}
				time.Sleep(time.Millisecond)
				now.Add(-1)
				mu.Lock()
				running[key] = false
				got[key] = append(got[key], i)
				mu.Unlock()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			q.End(line)
		}
	}
	last := q.Mark()
	eventually.True(t, 10*time.Second, "every line done", func() bool { return q.DoneThrough(last) })
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d tasks ran while another task of their key was running", n)
	}
	if peak.Load() < 2 {
		t.Errorf("at most %d task(s) ran at once: keys did not run in parallel", peak.Load())
	}
	mu.Lock()
	for k, seq := range got {
		if len(seq) != perKey {
			t.Errorf("%s: %d tasks ran, want %d", k, len(seq), perKey)
		}
		for i, v := range seq {
			if v != i {
				t.Errorf("%s: task %d ran in place %d: order not kept (%v)", k, v, i, seq)
				break
			}
		}
	}
	mu.Unlock()
	cancel()
	<-done
}

// A line is done only when it has ended and all its tasks ran; an earlier line not
// done keeps every later line from counting as done through.
func TestDoneThrough(t *testing.T) {
	q, err := actqueue.New(2, 10)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)

	release := make(chan struct{})
	first := q.Begin()
	if err := q.Add(ctx, first, "a", func(context.Context) actqueue.Task { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	q.End(first)
	second := q.Begin() // a line without tasks
	q.End(second)
	third := q.Begin()
	if q.DoneThrough(second) {
		t.Fatal("line 2 counts as done through while line 1's task is running")
	}
	close(release)
	eventually.True(t, 5*time.Second, "lines 1 and 2 done", func() bool { return q.DoneThrough(second) })
	if q.DoneThrough(third) {
		t.Fatal("line 3 counts as done before End")
	}
	q.End(third)
	if !q.DoneThrough(third) {
		t.Fatal("line 3 without tasks is not done after End")
	}
}

// Past its limit Add waits for room, and gives up when its context ends; a task
// cancelled while running leaves its line not done.
func TestBoundAndCancel(t *testing.T) {
	q, err := actqueue.New(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	runDone := make(chan struct{})
	go func() { q.Run(ctx); close(runDone) }()

	line := q.Begin()
	block := func(ctx context.Context) actqueue.Task { close(ran); <-ctx.Done(); return nil }
	if err := q.Add(ctx, line, "a", block); err != nil {
		t.Fatal(err)
	}
	<-ran
	if err := q.Add(ctx, line, "b", func(context.Context) actqueue.Task { return nil }); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	// The one worker runs "a" until cancelled, so "b" waits: the queue is full.
	if err := q.Add(short, line, "c", func(context.Context) actqueue.Task { return nil }); !errors.Is(err, actqueue.ErrFull) {
		t.Fatalf("Add past the limit: %v, want ErrFull", err)
	}
	q.End(line)
	cancel()
	<-runDone
	if q.DoneThrough(line) {
		t.Fatal("a line whose task was cancelled counts as done")
	}
	if _, err := actqueue.New(0, 1); err == nil {
		t.Fatal("New accepted 0 workers")
	}
}

// A task's rest runs after the tasks of other keys queued by then; its key's next
// task waits for it, and its line is done only once the rest is.
func TestRestAfterTheQueuedKeys(t *testing.T) {
	q, ctx := startOne(t)
	var r ranLog
	note := r.note
	release := make(chan struct{})
	lines := map[string]uint64{}
	for _, key := range []string{"a", "b", "c"} {
		line := q.Begin()
		lines[key] = line
		if err := q.Add(ctx, line, key, func(context.Context) actqueue.Task {
			note("fence " + key)
			return func(context.Context) actqueue.Task {
				if key == "a" {
					<-release
				}
				note("books " + key)
				return nil
			}
		}); err != nil {
			t.Fatal(err)
		}
		q.End(line)
	}
	// a's next task, queued before the queue runs: it waits for a's rest.
	next := q.Begin()
	if err := q.Add(ctx, next, "a", func(context.Context) actqueue.Task { note("next a"); return nil }); err != nil {
		t.Fatal(err)
	}
	q.End(next)
	go q.Run(ctx)

	eventually.True(t, 5*time.Second, "a's rest running", func() bool { return r.len() == 3 })
	if q.DoneThrough(lines["a"]) {
		t.Fatal("a's line counts as done while its rest has not run")
	}
	close(release)
	eventually.True(t, 5*time.Second, "every line done", func() bool { return q.DoneThrough(next) })
	// a's next task is a fresh one again: it goes before the books still waiting.
	r.check(t, "fence a", "fence b", "fence c", "books a", "next a", "books b", "books c")
}

// A rest waits for the fresh tasks added after it was queued too: every fence of a
// burst goes out before its books.
func TestFencesBeforeBooks(t *testing.T) {
	q, ctx := startOne(t)
	var r ranLog
	note := r.note
	inB, releaseB := make(chan struct{}), make(chan struct{})
	add := func(key string, block bool) {
		line := q.Begin()
		if err := q.Add(ctx, line, key, func(context.Context) actqueue.Task {
			if block {
				close(inB)
				<-releaseB
			}
			note("fence " + key)
			return func(context.Context) actqueue.Task { note("books " + key); return nil }
		}); err != nil {
			t.Fatal(err)
		}
		q.End(line)
	}
	add("a", false)
	add("b", true)
	go q.Run(ctx)
	<-inB // a's fence is done and its rest queued; b's fence is running
	add("c", false)
	close(releaseB)
	eventually.True(t, 5*time.Second, "every line done", func() bool { return q.DoneThrough(q.Mark()) })
	r.check(t, "fence a", "fence b", "fence c", "books a", "books b", "books c")
}

// ranLog records the order the tasks of a test ran in.
type ranLog struct {
	mu  sync.Mutex
	ran []string
}

func (r *ranLog) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ran = append(r.ran, s)
}

func (r *ranLog) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ran)
}

// check fails t unless the tasks ran in the order want.
func (r *ranLog) check(t *testing.T, want ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if fmt.Sprint(r.ran) != fmt.Sprint(want) {
		t.Fatalf("ran %v, want %v", r.ran, want)
	}
}

// startOne is a queue of one worker (the order is the queue's), stopped with t.
func startOne(t *testing.T) (*actqueue.Queue, context.Context) {
	q, err := actqueue.New(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return q, ctx
}

// Do runs after the key's earlier task and its rest, and waits for its own; on a
// queue that stopped first it says so instead of waiting.
func TestDoAfterTheRest(t *testing.T) {
	q, ctx := startOne(t)
	var r ranLog
	release := make(chan struct{})
	line := q.Begin()
	if err := q.Add(ctx, line, "a", func(context.Context) actqueue.Task {
		r.note("fence a")
		return func(context.Context) actqueue.Task { <-release; r.note("books a"); return nil }
	}); err != nil {
		t.Fatal(err)
	}
	q.End(line)
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { q.Run(runCtx); close(stopped) }()
	eventually.True(t, 5*time.Second, "a's fence done", func() bool { return r.len() == 1 })
	did := make(chan error, 1)
	go func() { did <- q.Do(ctx, "a", func(context.Context) { r.note("untaint a") }) }()
	select {
	case err := <-did:
		t.Fatalf("Do returned (%v) before a's rest ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-did; err != nil {
		t.Fatal(err)
	}
	r.check(t, "fence a", "books a", "untaint a")

	stop()
	<-stopped
	if err := q.Do(ctx, "b", func(context.Context) { r.note("b") }); !errors.Is(err, actqueue.ErrStopped) {
		t.Fatalf("Do on a stopped queue: %v, want ErrStopped", err)
	}
	r.check(t, "fence a", "books a", "untaint a")
}

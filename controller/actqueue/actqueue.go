// Package actqueue carries out decisions concurrently: a bounded pool of workers
// runs the tasks added under a key (a node) one at a time and in the order they were
// added, tasks of different keys in parallel. It also tracks which lines' tasks are
// all done, so that a read position is saved only past work that is carried out.
//
// The keys go through client-go's workqueue, which never hands one key to two
// workers at once; each key's tasks wait in a FIFO beside it.
package actqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// Task carries out one decision. It gets the queue's context: when that ends the
// task should stop, and its line counts as not done.
//
// A task may return the rest of its work: the rest runs once no fresh task of
// another key waits (those added after it included), its key's later tasks still
// waiting for it and its line not done before it. A decision fences its node first
// and writes its books after: in a burst every node is fenced before any of the
// burst's bookkeeping takes the API server's time.
type Task func(ctx context.Context) (rest Task)

type item struct {
	line uint64
	run  Task
}

// Queue is a pool of workers with per-key order, a bound on the tasks it holds,
// and line completion tracking. Use New, then Run.
type Queue struct {
	workers int
	keys    workqueue.TypedInterface[string]
	order   *fencesFirst  // keys' order in keys
	slots   chan struct{} // one per task queued or running: the back-pressure

	stopped chan struct{} // closed when Run returns

	mu     sync.Mutex
	chains map[string][]item // key → its tasks not yet started, in order
	last   uint64            // the newest line begun
	open   map[uint64]int    // line → its tasks not done, +1 while the line is being added
}

// New returns a Queue of workers workers holding at most limit tasks (queued or
// running); Add blocks past it.
func New(workers, limit int) (*Queue, error) {
	if workers < 1 || limit < 1 {
		return nil, fmt.Errorf("actqueue: workers (%d) and limit (%d) must be positive", workers, limit)
	}
	order := &fencesFirst{rests: map[string]bool{}}
	return &Queue{
		workers: workers,
		keys:    workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "faultline-act", Queue: order}),
		order:   order,
		stopped: make(chan struct{}),
		slots:   make(chan struct{}, limit),
		chains:  map[string][]item{},
		open:    map[uint64]int{},
	}, nil
}

// Run runs the workers until ctx ends, then waits for the tasks running to return.
// Tasks not started by then are dropped with their lines left not done.
func (q *Queue) Run(ctx context.Context) {
	defer close(q.stopped)
	stop := context.AfterFunc(ctx, q.keys.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	for range q.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q.work(ctx) {
			}
		}()
	}
	wg.Wait()
}

// work runs the next task of one key; false when the queue is shut down.
func (q *Queue) work(ctx context.Context) bool {
	key, shutdown := q.keys.Get()
	if shutdown {
		return false
	}
	defer q.keys.Done(key)
	q.mu.Lock()
	chain := q.chains[key]
	if len(chain) == 0 { // an Add whose task an earlier Get already ran
		q.mu.Unlock()
		return true
	}
	it := chain[0]
	q.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	rest := it.run(ctx)
	q.mu.Lock()
	if rest != nil && ctx.Err() == nil {
		// The key keeps its place at the head of its chain, and its slot: handed out
		// again once Done, after the keys queued meanwhile.
		q.chains[key][0] = item{line: it.line, run: rest}
		q.order.rest(key, true)
		q.keys.Add(key)
		q.mu.Unlock()
		return true
	}
	// Cancelled during the task: it may be half done, so its line stays not done.
	if ctx.Err() == nil {
		q.finish(it.line)
	}
	q.order.rest(key, false)
	if chain = q.chains[key][1:]; len(chain) == 0 {
		delete(q.chains, key)
	} else {
		q.chains[key] = chain
		q.keys.Add(key) // handed out again once Done: one task of a key at a time
	}
	q.mu.Unlock()
	<-q.slots
	return true
}

// Begin starts a line: its tasks are added with its number, and it is not done
// before End.
func (q *Queue) Begin() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.last++
	q.open[q.last] = 1
	return q.last
}

// End marks a line fully added: it is done once its tasks are.
func (q *Queue) End(line uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.finish(line)
}

// ErrFull is returned by Add when ctx ends while it waits for room.
var ErrFull = errors.New("actqueue: queue full")

// Add queues a task of line under key, after the key's earlier tasks. It blocks
// while the queue holds its limit, until a task finishes or ctx ends.
func (q *Queue) Add(ctx context.Context, line uint64, key string, t Task) error {
	select {
	case q.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrFull, ctx.Err())
	}
	q.mu.Lock()
	q.open[line]++
	q.chains[key] = append(q.chains[key], item{line: line, run: t})
	q.mu.Unlock()
	q.keys.Add(key)
	return nil
}

// ErrStopped is returned by Do when the queue stopped before the task ran.
var ErrStopped = errors.New("actqueue: queue stopped")

// Do runs do as a task of key, after the key's earlier tasks and their rests, and
// waits for it: a write to a node made off the decisions' path (an untaint asked
// for, a recovery) never lands between a decision's fence and its books. When ctx
// ends first Do returns its error, and the task still runs in its turn.
func (q *Queue) Do(ctx context.Context, key string, do func(ctx context.Context)) error {
	done := make(chan struct{})
	line := q.Begin()
	err := q.Add(ctx, line, key, func(ctx context.Context) Task {
		defer close(done)
		do(ctx)
		return nil
	})
	q.End(line)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-q.stopped:
		select {
		case <-done: // ran just before the queue stopped
			return nil
		default:
			return ErrStopped
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish counts one task (or the line's own hold) of line done; q.mu is held.
func (q *Queue) finish(line uint64) {
	if q.open[line]--; q.open[line] <= 0 {
		delete(q.open, line)
	}
}

// Mark is the newest line begun: a read position taken before Mark is called
// covers only lines at or before it.
func (q *Queue) Mark() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.last
}

// DoneThrough reports whether every line up to mark is done: begun, ended and all
// its tasks carried out without being cancelled.
func (q *Queue) DoneThrough(mark uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for line := range q.open {
		if line <= mark {
			return false
		}
	}
	return true
}

// fencesFirst orders the keys handed to the workers: those whose next task is a
// fresh one first, in the order they came, then those whose next task is the rest
// of one (see Task), in theirs. Under a burst every decision's fence goes out
// before any of the burst's books. It is the workqueue's queue, called under the
// workqueue's lock, which the Queue takes while holding its own: so it keeps which
// keys wait with a rest itself (marked before each Add) instead of reading the
// Queue's chains, and its own lock is taken last and calls nothing.
type fencesFirst struct {
	mu            sync.Mutex
	rests         map[string]bool // keys whose next task is a rest
	fences, books []string
}

// rest marks whether key's next task is a rest, before the key is added.
func (o *fencesFirst) rest(key string, is bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if is {
		o.rests[key] = true
	} else {
		delete(o.rests, key)
	}
}

func (o *fencesFirst) Touch(string) {}

func (o *fencesFirst) Push(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rests[key] {
		o.books = append(o.books, key)
	} else {
		o.fences = append(o.fences, key)
	}
}

func (o *fencesFirst) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.fences) + len(o.books)
}

func (o *fencesFirst) Pop() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	from := &o.fences
	if len(o.fences) == 0 {
		from = &o.books
	}
	key := (*from)[0]
	(*from)[0] = ""
	*from = (*from)[1:]
	return key
}

package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/faultline-dev/faultline/dmesg-exporter/cri"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/dmesg-exporter/state"
)

// Item is a record in flight with the position to commit once it is shipped.
type Item struct {
	Rec ship.Record
	// Pod records: the file the record was read from and the position after it.
	// Kernel records carry their position in Rec.Seq.
	PodPath string
	PodPos  state.PodPos
	// size is what the record holds of its lane's byte budget.
	size int
}

// minCutBody is the shortest body a record refused for its size is cut down to;
// a receiver that refuses even that is misconfigured, and the record is dropped
// (counted) rather than holding its source forever.
const minCutBody = 1 << 10

// lane carries the records of one source from its reader to the receiver: its own
// bounded buffer, batches and retries, and its own position commits. Kernel and pod
// records travel in separate lanes, so a flood of pod lines, or a pod line the
// receiver refuses, never delays a kernel line.
type lane struct {
	source string
	items  chan Item
	bytes  byteBudget
	cfg    *Config
	m      *Metrics
	log    *slog.Logger
	// commit persists the position after a batch the receiver accepted.
	commit func([]Item) error

	blocked atomic.Bool  // the reader waits for room
	refusal atomic.Value // string: why the receiver refuses this lane's batch; "" when it does not
}

func newLane(source string, cfg *Config, m *Metrics, log *slog.Logger, commit func([]Item) error) *lane {
	l := &lane{source: source, items: make(chan Item, cfg.BufferSize), cfg: cfg, m: m, commit: commit,
		log: log.With("source", source)}
	l.bytes.init(int64(cfg.BufferBytes), m.bufferBytes.WithLabelValues(source))
	l.refusal.Store("")
	m.bufferCapacity.WithLabelValues(source).Set(float64(cfg.BufferSize))
	m.bufferBytesCap.WithLabelValues(source).Set(float64(cfg.BufferBytes))
	m.refusing.WithLabelValues(source).Set(0)
	return l
}

// enqueue blocks while the lane holds its limit of records or bytes:
// back-pressure, never unbounded growth. It returns false when ctx ended.
func (l *lane) enqueue(ctx context.Context, it Item) bool {
	it.size = it.Rec.Size()
	if !l.bytes.tryAcquire(it.size) {
		l.blocked.Store(true)
		ok := l.bytes.acquire(ctx, it.size)
		l.blocked.Store(false)
		if !ok {
			return false
		}
	}
	select {
	case l.items <- it:
		return true
	default:
	}
	l.blocked.Store(true)
	defer l.blocked.Store(false)
	select {
	case l.items <- it:
		return true
	case <-ctx.Done():
		l.bytes.release(it.size)
		return false
	}
}

// run batches the lane's records, at most BatchSize records and BatchBytes bytes
// each, and ships them in order until ctx is done; then it ships what was read
// within ShutdownGrace. It returns an error only when a position cannot be saved.
func (l *lane) run(ctx context.Context) error {
	var (
		batch []Item
		size  int
		carry *Item // the record that did not fit the batch shipped last
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	add := func(it Item) bool {
		if len(batch) > 0 && size+it.size > l.cfg.BatchBytes {
			carry = &it
			return false
		}
		if len(batch) == 0 {
			timer.Reset(l.cfg.BatchWait)
		}
		batch = append(batch, it)
		size += it.size
		return len(batch) < l.cfg.BatchSize && size < l.cfg.BatchBytes
	}
	for {
		l.m.bufferFill.WithLabelValues(l.source).Set(float64(len(l.items)))
		full := false
		if carry != nil {
			it := *carry
			carry = nil
			full = !add(it)
		}
		if !full {
			select {
			case <-ctx.Done():
				return l.flush(batch)
			case it := <-l.items:
				full = !add(it)
				// Take what is already waiting, without blocking.
				for !full {
					select {
					case it := <-l.items:
						full = !add(it)
						continue
					default:
					}
					break
				}
			case <-timer.C:
				full = true
			}
		}
		if !full || len(batch) == 0 {
			continue
		}
		timer.Stop()
		if rest, err := l.deliver(ctx, batch); err != nil {
			if ctx.Err() != nil {
				// Not acknowledged: shipped at shutdown, or read again at start.
				return l.flush(append(rest, l.carried(carry)...))
			}
			return err
		}
		clear(batch) // let the shipped records' bodies go
		batch, size = batch[:0], 0
	}
}

func (l *lane) carried(c *Item) []Item {
	if c == nil {
		return nil
	}
	return []Item{*c}
}

// flush ships what was read before shutdown, within ShutdownGrace.
func (l *lane) flush(batch []Item) error {
	for {
		select {
		case it := <-l.items:
			batch = append(batch, it)
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ShutdownGrace)
	defer cancel()
	for len(batch) > 0 {
		n, size := 0, 0
		for n < len(batch) && n < l.cfg.BatchSize && (n == 0 || size+batch[n].size <= l.cfg.BatchBytes) {
			size += batch[n].size
			n++
		}
		if _, err := l.deliver(ctx, batch[:n]); err != nil {
			if ctx.Err() != nil {
				l.log.Warn("shutdown: unshipped records stay unacknowledged and are read again at start", "records", len(batch), "err", err)
				return nil
			}
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// deliver ships batch until the receiver accepted every record of it, committing
// the position after each accepted part. A batch refused for its size (413) is
// split in two, and a single record cut short; any other refusal is retried with
// backoff while /healthz reports it. It returns ctx's error, or the commit's,
// with the records not acknowledged.
func (l *lane) deliver(ctx context.Context, batch []Item) ([]Item, error) {
	start := time.Now()
	defer func() { l.m.batchLatency.Observe(time.Since(start).Seconds()) }()
	work := [][]Item{batch}
	refused := 0                    // refusals in a row
	var refusalWaits wait.DelayFunc // the waits between them; nil after a success
	for len(work) > 0 {
		b := work[0]
		err := ship.Retry(ctx, l.cfg.Sender, records(b), l.cfg.Backoff, func(attempt int, err error, wait time.Duration) {
			l.m.retries.WithLabelValues(l.source).Inc()
			l.log.Warn("send failed, retrying", "sender", l.cfg.Sender.Name(), "attempt", attempt, "wait", wait, "err", err)
		})
		if err == nil {
			refused, refusalWaits = 0, nil
			l.setRefusal(nil)
			if err := l.accepted(b); err != nil {
				return flatten(work), err
			}
			work = work[1:]
			continue
		}
		if ctx.Err() != nil {
			return flatten(work), ctx.Err()
		}
		code := "other"
		if c := ship.StatusCode(err); c != 0 {
			code = strconv.Itoa(c)
		} else if pe := (*ship.PartialSuccessError)(nil); errors.As(err, &pe) {
			code = "partial"
		}
		l.m.refusals.WithLabelValues(l.source, code).Inc()
		if ship.TooLarge(err) {
			if len(b) > 1 {
				h := len(b) / 2
				l.m.splits.WithLabelValues(l.source).Inc()
				work = append([][]Item{b[:h], b[h:]}, work[1:]...)
				continue
			}
			if body := b[0].Rec.Body; len(body) > minCutBody {
				// One record too large for the receiver: ship its head, marked as cut,
				// rather than lose it whole (the head of a line says what it is).
				b[0].Rec.Body = cri.Truncate(body, max(minCutBody, len(body)/2))
				l.m.cut.WithLabelValues(l.source).Inc()
				l.log.Warn("record too large for the receiver, cutting it short", "bytes", len(body), "now", len(b[0].Rec.Body))
				continue
			}
			l.m.dropped.WithLabelValues("too_large").Inc()
			l.log.Error("receiver refuses a single short record for its size; dropped", "bytes", len(b[0].Rec.Body), "err", err)
			if err := l.commit(b); err != nil {
				return flatten(work), err
			}
			l.bytes.release(b[0].size)
			work = work[1:]
			continue
		}
		// Any other refusal (400, 401, 403, rejected records…) is not the batch's
		// fault alone, or not for good: a config or credentials fix makes it pass.
		// Dropping it would lose lines silently; so retry, and say so on /healthz.
		refused++
		l.setRefusal(err)
		if refusalWaits == nil {
			refusalWaits = l.cfg.Backoff.Delays()
		}
		pause := refusalWaits()
		l.m.retries.WithLabelValues(l.source).Inc()
		l.log.Error("receiver refuses the batch; retrying, the position does not move", "records", len(b), "attempt", refused, "wait", pause, "err", err)
		select {
		case <-ctx.Done():
			return flatten(work), ctx.Err()
		case <-time.After(pause):
		}
	}
	return nil, nil
}

func flatten(work [][]Item) []Item {
	var out []Item
	for _, b := range work {
		out = append(out, b...)
	}
	return out
}

// accepted counts, commits and releases a batch the receiver acknowledged.
func (l *lane) accepted(b []Item) error {
	if len(b) == 0 {
		return nil
	}
	if err := l.commit(b); err != nil {
		return err
	}
	l.m.shipped.WithLabelValues(l.source).Add(float64(len(b)))
	n := 0
	for i := range b {
		n += b[i].size
	}
	l.bytes.release(n)
	return nil
}

func (l *lane) setRefusal(err error) {
	if err == nil {
		if l.refusal.Load().(string) != "" {
			l.refusal.Store("")
			l.m.refusing.WithLabelValues(l.source).Set(0)
		}
		return
	}
	l.refusal.Store(err.Error())
	l.m.refusing.WithLabelValues(l.source).Set(1)
}

// healthy reports the receiver refusing this lane's records.
func (l *lane) healthy() error {
	if r := l.refusal.Load().(string); r != "" {
		return fmt.Errorf("receiver refuses %s records: %s", l.source, r)
	}
	return nil
}

func records(b []Item) []ship.Record {
	recs := make([]ship.Record, len(b))
	for i := range b {
		recs[i] = b[i].Rec
	}
	return recs
}

// byteBudget bounds the bytes of records a lane holds between read and
// acknowledgement (buffer and batch in flight). A record larger than the whole
// budget takes all of it, so it passes alone.
type byteBudget struct {
	mu    sync.Mutex
	used  int64
	limit int64
	freed chan struct{} // closed when bytes are released
	gauge prometheus.Gauge
}

func (b *byteBudget) init(limit int64, gauge prometheus.Gauge) {
	b.limit, b.freed, b.gauge = limit, make(chan struct{}), gauge
}

func (b *byteBudget) tryAcquire(n int) bool {
	want := min(int64(n), b.limit)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+want > b.limit {
		return false
	}
	b.used += want
	b.gauge.Set(float64(b.used))
	return true
}

func (b *byteBudget) acquire(ctx context.Context, n int) bool {
	want := min(int64(n), b.limit)
	for {
		b.mu.Lock()
		if b.used+want <= b.limit {
			b.used += want
			b.gauge.Set(float64(b.used))
			b.mu.Unlock()
			return true
		}
		ch := b.freed // taken with the check: a release after it closes this one
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= min(int64(n), b.limit)
	b.gauge.Set(float64(b.used))
	close(b.freed)
	b.freed = make(chan struct{})
}

package ship

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Backoff configures the waits between attempts of Retry: a ceiling that grows
// exponentially (wait.Backoff's steps) with "full jitter" (each wait drawn
// uniformly from zero to the ceiling), so that many exporters that lost the same
// receiver do not come back in lockstep. The zero value uses the defaults.
type Backoff struct {
	// Initial is the ceiling of the first wait (default 500ms).
	Initial time.Duration
	// Max caps the ceiling (default 30s).
	Max time.Duration
	// Multiplier grows the ceiling after each failed attempt (default 2; values
	// below 1 mean the default).
	Multiplier float64
}

// Defaults of Backoff.
const (
	DefaultInitialBackoff = 500 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultMultiplier     = 2.0
)

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultInitialBackoff
	}
	if b.Max <= 0 {
		b.Max = DefaultMaxBackoff
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 || math.IsNaN(b.Multiplier) || math.IsInf(b.Multiplier, 0) {
		b.Multiplier = DefaultMultiplier
	}
	return b
}

// ceilings is the wait.Backoff whose steps are the upper bounds of the waits
// after successive failed attempts: Initial, then × Multiplier each, capped at Max.
func (b Backoff) ceilings() wait.Backoff {
	b = b.withDefaults()
	return wait.Backoff{Duration: b.Initial, Factor: b.Multiplier, Cap: b.Max, Steps: math.MaxInt32}
}

// Delays returns the waits after the successive failed attempts of one streak of
// failures, each drawn uniformly from zero to its ceiling (wait.Backoff's own
// jitter only adds to a step, which would keep every exporter at least the
// ceiling away). A streak that starts again after a success takes new Delays.
func (b Backoff) Delays() wait.DelayFunc {
	ceiling := b.ceilings().DelayFunc()
	return func() time.Duration {
		c := ceiling()
		if c <= 0 {
			return 0
		}
		return time.Duration(rand.Int64N(int64(c) + 1))
	}
}

// Retry calls s.Send until it succeeds, fails with an error that is not
// Retryable (returned as is), or ctx is done (the returned error then wraps
// ctx.Err() and names the last send error). Between attempts it waits the next of
// b.Delays(), or longer when the receiver asked for it with Retry-After (capped
// at b.Max). Before each wait it calls onRetry, when not nil, with the number of
// the attempt that failed (1-based), its error and the wait.
//
// A batch that can never be accepted (a 4xx other than 429) thus ends Retry at
// once, while an unreachable receiver keeps it waiting: the caller decides,
// through ctx, how long that may last.
func Retry(ctx context.Context, s Sender, recs []Record, b Backoff, onRetry func(attempt int, err error, wait time.Duration)) error {
	b = b.withDefaults()
	delays := b.Delays()
	var (
		attempt int
		next    time.Duration // the wait after the last failed attempt
		last    error         // the last failure that was not the context ending
		result  error         // what Retry returns when an attempt ends it
	)
	end := func(err error) (bool, error) {
		result = err
		return true, nil
	}
	err := wait.DelayFunc(func() time.Duration { return next }).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		attempt++
		err := s.Send(ctx, recs)
		if err == nil {
			return end(nil)
		}
		cerr := ctx.Err()
		switch {
		case cerr != nil && errors.Is(err, cerr):
			if last == nil {
				return end(err)
			}
			// This attempt was cut short; report the failure before it.
			return end(giveUp(ctx, s, attempt-1, last))
		case !Retryable(err):
			return end(err)
		case cerr != nil:
			return end(giveUp(ctx, s, attempt, err))
		}
		last = err
		next = delays()
		var he *HTTPError
		if errors.As(err, &he) && he.RetryAfter > next {
			next = min(he.RetryAfter, b.Max)
		}
		if onRetry != nil {
			onRetry(attempt, err, next)
		}
		return false, nil
	})
	if err != nil {
		// ctx ended during a wait.
		return giveUp(ctx, s, attempt, last)
	}
	return result
}

// giveUp is Retry's error when ctx ended: it wraps ctx.Err() and names the last
// send error.
func giveUp(ctx context.Context, s Sender, attempts int, last error) error {
	return fmt.Errorf("%s: %w (after %d attempts; last error: %v)", s.Name(), ctx.Err(), attempts, last)
}

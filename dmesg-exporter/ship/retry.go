package ship

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff configures the waits between attempts of Retry: exponential growth
// with "full jitter" (each wait drawn uniformly from zero to the current
// ceiling), so that many exporters that lost the same receiver do not come back
// in lockstep. The zero value uses the defaults.
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

// Ceiling returns the upper bound of the wait after the attempt-th failed
// attempt (1-based): min(Max, Initial × Multiplier^(attempt-1)).
func (b Backoff) Ceiling(attempt int) time.Duration {
	b = b.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	c := float64(b.Initial) * math.Pow(b.Multiplier, float64(attempt-1))
	if c >= float64(b.Max) || math.IsInf(c, 0) || math.IsNaN(c) {
		return b.Max
	}
	return time.Duration(c)
}

// Delay draws the wait after the attempt-th failed attempt uniformly from
// [0, Ceiling(attempt)].
func (b Backoff) Delay(attempt int) time.Duration {
	c := b.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}

// Retry calls s.Send until it succeeds, fails with an error that is not
// Retryable (returned as is), or ctx is done (the returned error then wraps
// ctx.Err() and names the last send error). Between attempts it waits
// b.Delay(attempt), or longer when the receiver asked for it with Retry-After
// (capped at b.Max). Before each wait it calls onRetry, when not nil, with the
// number of the attempt that failed (1-based), its error and the wait.
//
// A batch that can never be accepted (a 4xx other than 429) thus ends Retry at
// once, while an unreachable receiver keeps it waiting: the caller decides,
// through ctx, how long that may last.
func Retry(ctx context.Context, s Sender, recs []Record, b Backoff, onRetry func(attempt int, err error, wait time.Duration)) error {
	b = b.withDefaults()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var last error // the last failure that was not the context ending
	for attempt := 1; ; attempt++ {
		err := s.Send(ctx, recs)
		if err == nil {
			return nil
		}
		cerr := ctx.Err()
		switch {
		case cerr != nil && errors.Is(err, cerr):
			if last == nil {
				return err
			}
			// This attempt was cut short; report the failure before it.
			return giveUp(ctx, s, attempt-1, last)
		case !Retryable(err):
			return err
		case cerr != nil:
			return giveUp(ctx, s, attempt, err)
		}
		last = err
		wait := b.Delay(attempt)
		var he *HTTPError
		if errors.As(err, &he) && he.RetryAfter > wait {
			wait = min(he.RetryAfter, b.Max)
		}
		if onRetry != nil {
			onRetry(attempt, err, wait)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return giveUp(ctx, s, attempt, err)
		case <-timer.C:
		}
	}
}

// giveUp is Retry's error when ctx ended: it wraps ctx.Err() and names the last
// send error.
func giveUp(ctx context.Context, s Sender, attempts int, last error) error {
	return fmt.Errorf("%s: %w (after %d attempts; last error: %v)", s.Name(), ctx.Err(), attempts, last)
}

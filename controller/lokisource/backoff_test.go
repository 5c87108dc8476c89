package lokisource

import (
	"testing"
	"time"
)

// The reconnection waits: attempt n waits between half and all of
// min(Initial*2^n, Max), spread over that range.
func TestBackoffSteps(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	const n = 2000
	lo, hi := make([]time.Duration, len(ceilings)), make([]time.Duration, len(ceilings))
	for range n {
		steps := b.steps()
		for i, c := range ceilings {
			c *= time.Millisecond
			d := steps.Step()
			if d < c/2 || d > c {
				t.Fatalf("wait %d = %v, outside [%v, %v]", i+1, d, c/2, c)
			}
			if lo[i] == 0 || d < lo[i] {
				lo[i] = d
			}
			hi[i] = max(hi[i], d)
		}
	}
	for i, c := range ceilings {
		c *= time.Millisecond
		if lo[i] > c*6/10 || hi[i] < c*9/10 {
			t.Errorf("wait %d spans [%v, %v]: not jittered over [%v, %v]", i+1, lo[i], hi[i], c/2, c)
		}
	}
}

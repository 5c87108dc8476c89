package correlate

import (
	"math"
	"testing"
	"time"
)

// TestSeenKeepsTheTime: a line's time comes back from its 8 bytes as it went in,
// the zero time (a line without one) included; times past what Unix nanoseconds
// hold keep their order.
func TestSeenKeepsTheTime(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2025, 1, 1, 0, 0, 0, 123, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC),
	} {
		if got := newSeen(tm, "x").time(); !got.Equal(tm) {
			t.Errorf("%v came back as %v", tm, got)
		}
	}
	if got := newSeen(time.Time{}, "x").time(); !got.IsZero() {
		t.Errorf("the zero time came back as %v", got)
	}
	early, late := newSeen(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), ""), newSeen(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), "")
	zero, now := newSeen(time.Time{}, ""), newSeen(time.Now(), "")
	if early.time().IsZero() || !(zero.at < early.at && early.at < now.at && now.at < late.at) || late.at != math.MaxInt64 {
		t.Errorf("out of range: zero %d, 1500 %d, now %d, 3000 %d", zero.at, early.at, now.at, late.at)
	}
}

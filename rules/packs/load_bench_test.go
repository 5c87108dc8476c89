package packs_test

import (
	"testing"
	"time"

	"github.com/faultline-dev/faultline/rules/packs"
)

// BenchmarkLoad builds the default packs' matcher both ways in the same run: with
// every field (what `faultline rules test` and lint load) and for matching only
// (what scan and the controller load), and reports the ratio of their times.
func BenchmarkLoad(b *testing.B) {
	var full, matching time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := packs.Engine(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := packs.MatchingEngine(); err != nil {
			b.Fatal(err)
		}
		full, matching = full+mid.Sub(start), matching+time.Since(mid)
	}
	n := float64(b.N)
	b.ReportMetric(float64(full.Microseconds())/n/1000, "full-ms/op")
	b.ReportMetric(float64(matching.Microseconds())/n/1000, "matching-ms/op")
	b.ReportMetric(full.Seconds()/matching.Seconds(), "full/matching")
}

package rules

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkLoadDecode decodes the default packs both ways in the same run: the
// hand check of known fields over one tokenisation, and yaml.v3's strict decoder;
// full loads and loads for matching. It reports the ratio strict/hand.
func BenchmarkLoadDecode(b *testing.B) {
	files, err := filepath.Glob("packs/*.yaml")
	if err != nil || len(files) == 0 {
		b.Fatalf("no default packs: %v", err)
	}
	data := make([][]byte, len(files))
	for i, f := range files {
		if data[i], err = os.ReadFile(f); err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range []Loader{{}, {MatchingOnly: true}} {
		name := "full"
		if l.MatchingOnly {
			name = "matching"
		}
		b.Run(name, func(b *testing.B) {
			var hand, strict time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				for j, f := range files {
					if _, err := l.ParseFile(f, data[j]); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				for j, f := range files {
					if _, err := l.parseStrict(f, data[j]); err != nil {
						b.Fatal(err)
					}
				}
				hand, strict = hand+t1.Sub(t0), strict+time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(hand.Microseconds())/n/1000, "hand-ms/op")
			b.ReportMetric(float64(strict.Microseconds())/n/1000, "strict-ms/op")
			b.ReportMetric(strict.Seconds()/hand.Seconds(), "strict/hand")
		})
	}
}

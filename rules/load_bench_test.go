package rules

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLoadDecode decodes and validates the default packs, full loads (what
// `faultline rules test` and lint read) and loads for matching (scan, the
// controller), without compiling them (BenchmarkLoad in ./packs does that too).
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
			for i := 0; i < b.N; i++ {
				for j, f := range files {
					if _, err := l.ParseFile(f, data[j]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

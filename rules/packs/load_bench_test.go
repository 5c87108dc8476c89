package packs_test

import (
	"testing"
	"time"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
	"github.com/faultline-dev/faultline/test/packengine"
)

// BenchmarkLoad builds the default packs' matcher both ways in the same run: with
// every field (what `faultline rules test` and lint load) and for matching only
// (what scan and the controller load), and reports the ratio of their times.
func BenchmarkLoad(b *testing.B) {
	var full, matching time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := packengine.Engine(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := packengine.Matching(); err != nil {
			b.Fatal(err)
		}
		full, matching = full+mid.Sub(start), matching+time.Since(mid)
	}
	n := float64(b.N)
	b.ReportMetric(float64(full.Microseconds())/n/1000, "full-ms/op")
	b.ReportMetric(float64(matching.Microseconds())/n/1000, "matching-ms/op")
	b.ReportMetric(full.Seconds()/matching.Seconds(), "full/matching")
}

// BenchmarkLoadCompiled builds the default packs' matcher for matching both ways in
// the same run: parsing the YAML files (the loader a stale image falls back to)
// and from the compiled image (LoadForMatching), and reports the time of each,
// its load apart, and the ratio. The image's digest is checked once per process,
// before the first load (see FilesDigest), so not in these times.
func BenchmarkLoadCompiled(b *testing.B) {
	if !packs.ImageCurrent() {
		b.Fatal("the compiled packs are stale: run `go generate ./rules/packs`")
	}
	parse := func() ([]*rules.Pack, error) {
		return rules.Loader{MatchingOnly: true, Checked: true}.LoadFS(packs.FS, ".")
	}
	var yamlLoad, yamlAll, imageLoad, imageAll time.Duration
	build := func(load func() ([]*rules.Pack, error), loaded, all *time.Duration) {
		start := time.Now()
		ps, err := load()
		if err != nil {
			b.Fatal(err)
		}
		*loaded += time.Since(start)
		set, err := rules.Compile(ps)
		if err != nil {
			b.Fatal(err)
		}
		rules.NewEngine(set)
		*all += time.Since(start)
	}
	for i := 0; i < b.N; i++ {
		build(parse, &yamlLoad, &yamlAll)
		build(packs.LoadForMatching, &imageLoad, &imageAll)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) / 1000 }
	b.ReportMetric(ms(yamlAll), "yaml-ms/op")
	b.ReportMetric(ms(imageAll), "compiled-ms/op")
	b.ReportMetric(ms(yamlLoad), "yaml-load-ms/op")
	b.ReportMetric(ms(imageLoad), "compiled-load-ms/op")
	b.ReportMetric(yamlAll.Seconds()/imageAll.Seconds(), "yaml/compiled")
}

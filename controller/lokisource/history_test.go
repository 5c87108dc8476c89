package lokisource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"

	"github.com/faultline-dev/faultline/logstream"
)

// testHistory reads two queries' lines over a stretch longer than the test Loki's
// max_query_length, in steps longer than it too: every line once, merged by time
// across the queries.
func testHistory(t *testing.T, loki string) {
	now := time.Now().Truncate(time.Second)
	from := now.Add(-150 * time.Minute)
	var kernel, pod []push.Entry
	var want []string
	for i := range 12 {
		at := from.Add(time.Duration(i)*12*time.Minute + time.Minute)
		line := fmt.Sprintf("history line %02d", i)
		want = append(want, line)
		if i%3 == 0 {
			pod = append(pod, push.Entry{Timestamp: at, Line: line})
		} else {
			kernel = append(kernel, push.Entry{Timestamp: at, Line: line})
		}
	}
	pushOrFail(t, loki,
		push.Stream{Labels: `{source="kernel", node="n-history"}`, Entries: kernel},
		push.Stream{Labels: `{source="pod", node="n-history"}`, Entries: pod})
	src, err := New(Config{URL: loki, MaxQueryLength: testMaxQueryLength, PageLimit: 2, Queries: []Query{
		{Name: "kernel", LogQL: `{source="kernel", node="n-history"}`},
		{Name: "pod", LogQL: `{source="pod", node="n-history"}`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var sources []string
	var steps []time.Time
	r := Range{From: from, To: now, Step: 90 * time.Minute, Progress: func(done time.Time) { steps = append(steps, done) }}
	if err := src.History(context.Background(), r, func(l logstream.Line) error {
		got = append(got, l.Text)
		sources = append(sources, l.Source)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("History emitted\n%v\nwant, in time order across the queries,\n%v", got, want)
	}
	if sources[0] != logstream.SourcePod || sources[1] != logstream.SourceKernel {
		t.Errorf("sources %v: the lines' own source labels", sources)
	}
	if len(steps) != 2 || !steps[1].Equal(now) {
		t.Errorf("progress %v, want two steps ending at %s", steps, now)
	}

	r.MaxLines, r.Progress = 3, nil
	err = src.History(context.Background(), r, func(logstream.Line) error { return nil })
	if !errors.Is(err, ErrTooManyLines) {
		t.Errorf("a step over MaxLines: err %v, want ErrTooManyLines", err)
	}
	if err := src.History(context.Background(), Range{From: now, To: now}, nil); err == nil {
		t.Error("an empty range is no error")
	}
}

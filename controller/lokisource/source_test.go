package lokisource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// testMaxQueryLength is the test Loki's max_query_length: a catch-up of a few hours
// needs several windows.
const testMaxQueryLength = time.Hour

// testMaxEntries is the test Loki's max_entries_limit_per_query, below
// DefaultPageLimit.
const testMaxEntries = 400

// TestLokiEdgeCases runs the Source against one real Loki configured with short or
// wide limits; each subtest uses streams of its own nodes.
func TestLokiEdgeCases(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true, LokiLimits: map[string]string{
		"max_query_length": testMaxQueryLength.String(),
		// Lines 15 minutes ahead of Loki's clock are accepted (default: 10m).
		"creation_grace_period": "1h",
		// Pages of 256 KiB lines.
		"max_line_size":           "1MB",
		"ingestion_rate_mb":       "64",
		"ingestion_burst_size_mb": "64",
		// Below the default page: pages shrink to it.
		"max_entries_limit_per_query": strconv.Itoa(testMaxEntries),
	}})
	loki := env.LokiURL()

	t.Run("CatchUpLongerThanMaxQueryLength", func(t *testing.T) {
		now := time.Now()
		var want []string
		var entries []push.Entry
		// A few hours back: several windows of the test Loki's max_query_length.
		for _, ago := range []time.Duration{2*time.Hour + 40*time.Minute, time.Hour + 50*time.Minute, 55 * time.Minute, 10 * time.Minute} {
			line := fmt.Sprintf("catch-up line %s ago", ago)
			want = append(want, line)
			entries = append(entries, push.Entry{Timestamp: now.Add(-ago), Line: line})
		}
		pushOrFail(t, loki, push.Stream{Labels: `{source="kernel", node="n-catchup"}`, Entries: entries})

		// Configured like the Loki, and unset (Loki's default, longer than this
		// Loki allows: the window shrinks when Loki refuses it).
		for _, maxLen := range []time.Duration{testMaxQueryLength, 0} {
			t.Run(fmt.Sprintf("max_query_length=%s", maxLen), func(t *testing.T) {
				r := run(t, Config{URL: loki, MaxQueryLength: maxLen,
					Queries: []Query{{Name: "kernel", LogQL: `{node="n-catchup"}`}}}, StartAt(now.Add(-170*time.Minute)))
				r.waitFor(t, want...)
				if err := r.src.Health(); err != nil {
					t.Fatalf("Health() = %v, want nil", err)
				}
			})
		}
	})

	t.Run("History", func(t *testing.T) { testHistory(t, loki) })
	t.Run("SlowCatchUp", func(t *testing.T) { testSlowCatchUp(t, loki) })
	t.Run("DenseCatchUp", func(t *testing.T) { testDenseCatchUp(t, loki) })
	t.Run("PageOverLokisLimit", func(t *testing.T) { testPageOverLokisLimit(t, loki) })
	t.Run("PollReadsWhatTheTailMisses", func(t *testing.T) { testPollReadsWhatTheTailMisses(t, loki) })
	t.Run("CountBuckets", func(t *testing.T) { testCountBuckets(t, loki) })
	t.Run("AuditWithoutCounts", func(t *testing.T) { testAuditWithoutCounts(t, loki) })

	t.Run("CaughtUpOnceTheBacklogIsRead", func(t *testing.T) { testCaughtUp(t, loki) })

	t.Run("RefusedQueryKeepsLastGood", func(t *testing.T) {
		good := Query{Name: "kernel", LogQL: `{node="n-refused"}`}
		bad := Query{Name: "kernel", LogQL: `{node="n-refused"} | no_such_stage`}
		neverGood := Query{Name: "pod", LogQL: `{node="n-refused", source="pod"} |~ "("`}
		r := run(t, Config{URL: loki, Queries: []Query{good, neverGood}}, Checkpoint{})
		pushLine(t, loki, `{source="kernel", node="n-refused"}`, time.Now(), "before the reload")
		r.waitFor(t, "before the reload")
		eventually.True(t, 10*time.Second, "the pod query reported refused", func() bool {
			return testutil.ToFloat64(r.m.refused.WithLabelValues("pod")) == 1
		})

		if err := r.src.SetQueries([]Query{bad, neverGood}); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 10*time.Second, "the new kernel query reported refused", func() bool {
			return testutil.ToFloat64(r.m.refused.WithLabelValues("kernel")) == 1
		})
		pushLine(t, loki, `{source="kernel", node="n-refused"}`, time.Now(), "after the reload")
		r.waitFor(t, "after the reload")
		err := r.src.Health()
		if err == nil || !strings.Contains(err.Error(), bad.LogQL) || !strings.Contains(err.Error(), neverGood.LogQL) ||
			!strings.Contains(err.Error(), "400") {
			t.Fatalf("Health() = %v, want both refused queries with Loki's 400", err)
		}
		if n := testutil.ToFloat64(r.m.refusals.WithLabelValues("kernel")); n != 1 {
			t.Fatalf("refusals of the kernel query = %v, want 1 (not retried)", n)
		}

		// A reload that Loki accepts clears the report.
		if err := r.src.SetQueries([]Query{good}); err != nil {
			t.Fatal(err)
		}
		eventually.NoError(t, 10*time.Second, "Health() nil after an accepted reload", r.src.Health)
		if v := testutil.ToFloat64(r.m.refused.WithLabelValues("kernel")); v != 0 {
			t.Fatalf("kernel refused gauge = %v, want 0", v)
		}
	})

	t.Run("PageOf256KiBLines", func(t *testing.T) {
		// 12 lines of 256 KiB (3 MiB, under Loki's 4 MiB gRPC messages) against a
		// 1 MiB response limit: read in pages of 3.
		now := time.Now()
		var want []string
		var entries []push.Entry
		for i := range 12 {
			line := bigLine(fmt.Sprintf("page line %02d ", i), 256<<10)
			want = append(want, line)
			entries = append(entries, push.Entry{Timestamp: now.Add(time.Duration(i-20) * time.Second), Line: line})
		}
		pushOrFail(t, loki, push.Stream{Labels: `{source="pod", node="n-page"}`, Entries: entries})
		r := run(t, Config{URL: loki, MaxResponseBytes: 1 << 20, PageLimit: 100,
			Queries: []Query{{Name: "pod", LogQL: `{node="n-page"}`}}}, StartAt(now.Add(-time.Minute)))
		r.waitFor(t, want...)
		if n := testutil.ToFloat64(r.m.readLimit.WithLabelValues("pod", "response")); n < 1 {
			t.Fatalf("response read limit hits = %v, want at least 1", n)
		}
	})

	t.Run("TailMessageOverLimit", func(t *testing.T) {
		// The poll is slow, so only the tail sees the lines first; its message
		// (6 × 256 KiB) is over the limit, the catch-up that follows reads them.
		r := run(t, Config{URL: loki, MaxResponseBytes: 1 << 20, PollInterval: time.Hour,
			Queries: []Query{{Name: "pod", LogQL: `{node="n-tail"}`}}}, Checkpoint{})
		r.waitTail(t, loki, `{source="pod", node="n-tail"}`)
		now := time.Now()
		var want []string
		var entries []push.Entry
		for i := range 6 {
			line := bigLine(fmt.Sprintf("tail line %02d ", i), 256<<10)
			want = append(want, line)
			entries = append(entries, push.Entry{Timestamp: now.Add(time.Duration(i) * time.Millisecond), Line: line})
		}
		pushOrFail(t, loki, push.Stream{Labels: `{source="pod", node="n-tail"}`, Entries: entries})
		r.waitFor(t, want...)
		if n := testutil.ToFloat64(r.m.readLimit.WithLabelValues("pod", "tail")); n < 1 {
			t.Fatalf("tail read limit hits = %v, want at least 1", n)
		}
		if n := testutil.ToFloat64(r.m.reconnects.WithLabelValues("pod", "read_limit")); n < 1 {
			t.Fatalf("read_limit reconnects = %v, want at least 1", n)
		}
	})

	t.Run("NodeClock15MinutesBehindAndAhead", func(t *testing.T) {
		r := run(t, Config{URL: loki, ClockTolerance: time.Minute, CreationGracePeriod: time.Hour,
			Queries: []Query{{Name: "kernel", LogQL: `{node=~"n-behind|n-ahead"}`}}}, Checkpoint{})
		r.waitTail(t, loki, `{source="kernel", node="n-behind"}`)

		pushed := time.Now()
		pushLine(t, loki, `{source="kernel", node="n-behind"}`, pushed.Add(-15*time.Minute), "Xid 79 from a clock 15m behind")
		pushLine(t, loki, `{source="kernel", node="n-ahead"}`, pushed.Add(15*time.Minute), "Xid 79 from a clock 15m ahead")
		got := r.waitFor(t, "Xid 79 from a clock 15m behind", "Xid 79 from a clock 15m ahead")
		read := time.Now()
		for _, l := range got {
			if l.Time.Before(pushed) || l.Time.After(read) {
				t.Errorf("%q dated %s, want the controller's time of arrival (between %s and %s)", l.Text, l.Time, pushed, read)
			}
		}
		if n := testutil.ToFloat64(r.m.clamped.WithLabelValues("kernel", "behind")); n != 1 {
			t.Errorf("lines clamped from behind = %v, want 1", n)
		}
		if n := testutil.ToFloat64(r.m.clamped.WithLabelValues("kernel", "ahead")); n != 1 {
			t.Errorf("lines clamped from ahead = %v, want 1", n)
		}
		if p := r.src.Checkpoint().Queries["kernel"].Time; p.After(read) {
			t.Errorf("position %s is after the controller's clock %s", p, read)
		}
	})

	t.Run("NodeAsStructuredMetadata", func(t *testing.T) {
		// One stream carries every node, as where Loki keeps the node as structured
		// metadata (its default for OTLP's k8s.node.name): two nodes log the same
		// line at the same nanosecond, once before the Source starts (catch-up) and
		// once while it tails (tail and poll both read it).
		same := func(at time.Time, line string) push.Stream {
			var es []push.Entry
			for _, n := range []string{"n-meta-1", "n-meta-2"} {
				es = append(es, push.Entry{Timestamp: at, Line: line, StructuredMetadata: push.LabelsAdapter{{Name: logstream.LabelNode, Value: n}}})
			}
			return push.Stream{Labels: `{source="kernel", fleet="meta"}`, Entries: es}
		}
		pushOrFail(t, loki, same(time.Now().Add(-time.Minute), "Xid 79 on two nodes, read by the catch-up"))
		r := run(t, Config{URL: loki, PollInterval: 500 * time.Millisecond,
			Queries: []Query{{Name: "kernel", LogQL: `{fleet="meta"}`}}}, StartAt(time.Now().Add(-2*time.Minute)))
		r.waitTail(t, loki, `{source="kernel", fleet="meta"}`)
		pushOrFail(t, loki, same(time.Now(), "Xid 79 on two nodes, read while tailing"))
		time.Sleep(3 * time.Second) // polls re-read both pairs
		for _, text := range []string{"Xid 79 on two nodes, read by the catch-up", "Xid 79 on two nodes, read while tailing"} {
			eventually.NoError(t, 30*time.Second, "the line emitted once per node", func() error {
				nodes := map[string]int{}
				for _, l := range r.lines() {
					if l.Text == text {
						nodes[l.Node]++
					}
				}
				if len(nodes) != 2 || nodes["n-meta-1"] != 1 || nodes["n-meta-2"] != 1 {
					return fmt.Errorf("%q emitted for nodes %v, want once for each of n-meta-1 and n-meta-2", text, nodes)
				}
				return nil
			})
		}

		// A shard's matcher on the node, as a label filter: only its node's lines.
		sel, err := Selectors{"kernel": `{fleet="meta"}`}.WithMatcher(`| node="n-meta-1"`)
		if err != nil {
			t.Fatal(err)
		}
		shard := run(t, Config{URL: loki, Queries: []Query{{Name: "kernel", LogQL: sel["kernel"]}}}, StartAt(time.Now().Add(-2*time.Minute)))
		got := shard.waitFor(t, "Xid 79 on two nodes, read by the catch-up", "Xid 79 on two nodes, read while tailing")
		for _, l := range got {
			if l.Node != "n-meta-1" {
				t.Errorf("the shard of n-meta-1 read %q of %q", l.Text, l.Node)
			}
		}
	})

	t.Run("EarlierBootDoesNotRetaint", func(t *testing.T) {
		now := time.Now()
		meta := func(boot string) push.LabelsAdapter {
			return push.LabelsAdapter{{Name: logstream.MetaBootID, Value: boot}}
		}
		pushOrFail(t, loki, push.Stream{Labels: `{source="kernel", node="n-boot"}`, Entries: []push.Entry{
			{Timestamp: now.Add(-2 * time.Hour), Line: "Xid 79 before the reboot", StructuredMetadata: meta("boot-1")},
			{Timestamp: now.Add(-time.Hour), Line: "Xid 79 in the current boot", StructuredMetadata: meta("boot-2")},
		}})
		pushLine(t, loki, `{source="kernel", node="n-unknown"}`, now.Add(-2*time.Hour), "Xid 79 on a node without a boot ID")
		current := map[string]string{"n-boot": "boot-2"}
		r := run(t, Config{URL: loki, BootID: func(node string) string { return current[node] },
			Queries: []Query{{Name: "kernel", LogQL: `{node=~"n-boot|n-unknown"}`}}}, StartAt(now.Add(-3*time.Hour)))
		r.waitFor(t, "Xid 79 in the current boot", "Xid 79 on a node without a boot ID")

		// The node rebooted again; its Node object does not show it yet.
		pushOrFail(t, loki, push.Stream{Labels: `{source="kernel", node="n-boot"}`, Entries: []push.Entry{
			{Timestamp: time.Now(), Line: "Xid 79 in a boot the Node does not show yet", StructuredMetadata: meta("boot-3")},
		}})
		r.waitFor(t, "Xid 79 in a boot the Node does not show yet")
		for _, l := range r.lines() {
			if l.Text == "Xid 79 before the reboot" {
				t.Fatalf("a line of an earlier boot was emitted: %+v", l)
			}
		}
		if n := testutil.ToFloat64(r.m.earlierBoot.WithLabelValues("kernel")); n != 1 {
			t.Fatalf("earlier-boot lines = %v, want 1", n)
		}
	})
}

// sourceRun is a Source running in the background, collecting what it emits.
type sourceRun struct {
	src *Source
	m   *PrometheusMetrics

	mu  sync.Mutex
	got []logstream.Line
}

// run starts a Source with cfg (fast backoff, its own metrics) from from (the zero
// Checkpoint: now, before run returns), until the test ends; Run must not fail.
func run(t *testing.T, cfg Config, from Checkpoint) *sourceRun {
	t.Helper()
	r := &sourceRun{m: NewPrometheusMetrics(prometheus.NewRegistry())}
	cfg.Metrics = r.m
	cfg.Backoff = Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.src = src
	if from.Start.IsZero() && from.Queries == nil {
		from = StartAt(time.Now())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, from, func(l logstream.Line) error {
			r.mu.Lock()
			r.got = append(r.got, l)
			r.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

func (r *sourceRun) lines() []logstream.Line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logstream.Line(nil), r.got...)
}

// waitFor waits until each text was emitted exactly once and returns those lines.
func (r *sourceRun) waitFor(t *testing.T, texts ...string) []logstream.Line {
	t.Helper()
	var found []logstream.Line
	eventually.NoError(t, 30*time.Second, "lines emitted once", func() error {
		found = found[:0]
		got := r.lines()
		for _, want := range texts {
			n := 0
			for _, l := range got {
				if l.Text == want {
					n++
					found = append(found, l)
				}
			}
			if n != 1 {
				return fmt.Errorf("line %.40q emitted %d times, want once (%d lines emitted)", want, n, len(got))
			}
		}
		return nil
	})
	return found
}

// waitTail returns once the Source tails: a line pushed to stream is emitted, and
// the tail, opened after the first catch-up, had time to be registered.
func (r *sourceRun) waitTail(t *testing.T, loki, stream string) {
	t.Helper()
	pushLine(t, loki, stream, time.Now(), "marker before tailing")
	r.waitFor(t, "marker before tailing")
	time.Sleep(tailReadyTimeout + time.Second)
}

func pushOrFail(t *testing.T, loki string, streams ...push.Stream) {
	t.Helper()
	if err := testenv.PushLoki(loki, streams); err != nil {
		t.Fatal(err)
	}
}

func pushLine(t *testing.T, loki, labels string, ts time.Time, line string) {
	t.Helper()
	pushOrFail(t, loki, push.Stream{Labels: labels, Entries: []push.Entry{{Timestamp: ts, Line: line}}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// bigLine is prefix padded to n bytes.
func bigLine(prefix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix))
}

// testCaughtUp: CaughtUp is false before Run and while the lines since the start
// are being emitted (here emit holds the first of them), and true once every query
// the run began with has read up to the time it began; a query Loki refuses, with
// no accepted LogQL to fall back to, reads nothing more and does not hold it back.
func testCaughtUp(t *testing.T, loki string) {
	now := time.Now()
	var entries []push.Entry
	for i := range 3 {
		entries = append(entries, push.Entry{Timestamp: now.Add(time.Duration(i-10) * time.Second), Line: fmt.Sprintf("backlog line %d", i)})
	}
	pushOrFail(t, loki, push.Stream{Labels: `{source="kernel", node="n-caughtup"}`, Entries: entries})
	src, err := New(Config{URL: loki, Backoff: Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
		Metrics: NewPrometheusMetrics(prometheus.NewRegistry()),
		Queries: []Query{{Name: "kernel", LogQL: `{node="n-caughtup"}`}, {Name: "pod", LogQL: `{node="n-caughtup", source="pod"} |~ "("`}}})
	if err != nil {
		t.Fatal(err)
	}
	if src.CaughtUp() {
		t.Fatal("CaughtUp before Run")
	}
	first, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, StartAt(now.Add(-time.Minute)), func(l logstream.Line) error {
			mu.Lock()
			got = append(got, l.Text)
			n := len(got)
			mu.Unlock()
			if n == 1 {
				close(first)
				<-release
			}
			return nil
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("no line of the backlog emitted")
	}
	time.Sleep(200 * time.Millisecond) // the refused query settles meanwhile
	if src.CaughtUp() {
		close(release)
		t.Fatal("CaughtUp while the first line of the backlog is being emitted")
	}
	close(release)
	eventually.True(t, 30*time.Second, "CaughtUp once the backlog is read", src.CaughtUp)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("CaughtUp with %d of the backlog's 3 lines emitted: %q", len(got), got)
	}
}

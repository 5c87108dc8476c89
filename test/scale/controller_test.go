package scale_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// controllerProc is the faultline controller binary running as its own process, so
// that its memory is its own.
type controllerProc struct {
	cmd    *exec.Cmd
	addr   string // /metrics
	stderr *syncBuffer
	peak   atomic.Int64 // highest RSS sampled, bytes
	// The parts of the peak sample: anonymous (heap, stacks) and the executable's
	// pages (RssFile, charged to the container too).
	peakAnon, peakFile atomic.Int64
	start              time.Time
	stop               chan struct{}

	mu      sync.Mutex
	fams    map[string]*dto.MetricFamily // last scrape
	scraped time.Time
	done    sync.WaitGroup
}

// startController runs `faultline controller` with default flags except those a test
// environment needs and extra, waits until it leads, and samples its RSS every 100 ms
// until the test ends.
func startController(t *testing.T, env *testenv.Env, namespace string, extra ...string) *controllerProc {
	t.Helper()
	bin := testenv.BuildFaultline(t)
	addr := testenv.FreeAddr(t)
	args := append([]string{"controller", "--kubeconfig", env.Kubeconfig(), "--loki-url", env.LokiURL(),
		"--namespace", namespace, "--identity", "scale", "--listen", addr, "--initial-lookback", "1m",
		"--log-format", "text", "--log-level", "debug"}, extra...)
	c := &controllerProc{cmd: exec.Command(bin, args...), addr: addr, stderr: &syncBuffer{}, stop: make(chan struct{})}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start controller: %v", err)
	}
	c.start = time.Now()
	t.Cleanup(func() {
		close(c.stop)
		c.done.Wait()
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		if t.Failed() {
			t.Logf("controller log ends:\n%s", tail(c.stderr.String(), 30))
		}
		if f := os.Getenv(envLog); f != "" {
			if err := os.WriteFile(f, []byte(c.stderr.String()), 0o644); err != nil {
				t.Errorf("%s: %v", envLog, err)
			}
		}
	})
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, anon, file := testenv.RSSParts(c.cmd.Process.Pid); rss > c.peak.Load() {
				c.peak.Store(rss)
				c.peakAnon.Store(anon)
				c.peakFile.Store(file)
			}
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
		}
	}()
	eventually.True(t, 2*time.Minute, "the controller leads", func() bool {
		return strings.Contains(c.stderr.String(), "leading")
	})
	return c
}

func (c *controllerProc) rss() int64 { return testenv.RSS(c.cmd.Process.Pid) }

// scrapeEvery bounds how often the test scrapes the controller, so that polling does
// not add to the load it measures; metric values are at most this old.
const scrapeEvery = 250 * time.Millisecond

// metric sums the samples of a counter or gauge on the controller's /metrics whose
// labels include match.
func (c *controllerProc) metric(name string, match map[string]string) (float64, error) {
	fams, err := c.scrape()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for k, v := range match {
			ok = ok && labels[k] == v
		}
		if ok {
			total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return total, nil
}

// histogramCount is the number of observations of the histogram name, all labels.
func (c *controllerProc) histogramCount(name string) (int, error) {
	fams, err := c.scrape()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range fams[name].GetMetric() {
		n += int(m.GetHistogram().GetSampleCount())
	}
	return n, nil
}

// logSplit logs the controller's own split of line → decision so far: line →
// decision (Loki's delivery and the reading) and decision → carried out (a worker's
// wait and the API writes) by action, each as a count, a mean and the upper bound
// of the bucket holding its p99.
func (c *controllerProc) logSplit(t *testing.T, when string) {
	t.Helper()
	fams, err := c.scrape()
	if err != nil {
		t.Logf("%s: %v", when, err)
		return
	}
	for _, p := range []struct{ what, name string }{
		{"line → decision", "faultline_controller_decision_delay_seconds"},
		{"decision → fenced", "faultline_controller_fence_seconds"},
		{"decision → carried out", "faultline_controller_carry_seconds"},
	} {
		for _, m := range fams[p.name].GetMetric() {
			what := p.what
			for _, lp := range m.GetLabel() {
				what += " (" + lp.GetValue() + ")"
			}
			h := m.GetHistogram()
			if h.GetSampleCount() == 0 {
				continue
			}
			p99 := "+Inf"
			for _, b := range h.GetBucket() {
				if float64(b.GetCumulativeCount()) >= 0.99*float64(h.GetSampleCount()) {
					p99 = strconv.FormatFloat(1000*b.GetUpperBound(), 'f', 0, 64) + " ms"
					break
				}
			}
			t.Logf("%s: %s: %d, mean %.0f ms, p99 at most %s", when, what, h.GetSampleCount(),
				1000*h.GetSampleSum()/float64(h.GetSampleCount()), p99)
		}
	}
}

// logIntake logs what the controller's intake took and which lines each path
// delivered second (and so skipped).
func (c *controllerProc) logIntake(t *testing.T) {
	t.Helper()
	fams, err := c.scrape()
	if err != nil {
		t.Logf("intake: %v", err)
		return
	}
	sum := func(name string) map[string]float64 {
		out := map[string]float64{}
		for _, m := range fams[name].GetMetric() {
			k := ""
			for _, lp := range m.GetLabel() {
				k += lp.GetName() + "=" + lp.GetValue() + " "
			}
			out[strings.TrimSpace(k)] += m.GetCounter().GetValue()
		}
		return out
	}
	t.Logf("intake: requests %v, lines %v, skipped %v; lines delivered second and skipped, by path: %v",
		sum("faultline_controller_intake_requests_total"), sum("faultline_controller_intake_lines_total"),
		sum("faultline_controller_intake_records_skipped_total"), sum("faultline_controller_duplicate_lines_total"))
}

// cpu returns the CPU time the controller used (user and system) and the wall time
// since it started.
func (c *controllerProc) cpu() (used, wall time.Duration) {
	return testenv.CPUTime(c.cmd.Process.Pid), time.Since(c.start)
}

// progress returns a check that fails once the controller has neither read a line
// from Loki nor made a decision for longer than stall while the background keeps
// sending: a reader that stopped, told apart from a slow one and from one busy with
// the decisions of a burst (lines wait while their decisions are carried out).
func (c *controllerProc) progress(stall time.Duration) func() error {
	last, at := -1.0, time.Now()
	return func() error {
		read, err := c.metric("faultline_loki_lines_total", nil)
		if err != nil {
			return nil // a scrape that failed says nothing about reading
		}
		decided, err := c.metric("faultline_controller_decisions_total", nil)
		if err != nil {
			return nil
		}
		if read+decided != last {
			last, at = read+decided, time.Now()
			return nil
		}
		if time.Since(at) > stall {
			return fmt.Errorf("the controller read no line from Loki and decided nothing for %s (%.0f lines read); its log ends:\n%s",
				stall, read, tail(c.stderr.String(), 30))
		}
		return nil
	}
}

// logLag logs how far the controller's reading of Loki is behind, to tell its own
// delays from Loki's in a slow run.
func (c *controllerProc) logLag(t *testing.T, when string) {
	t.Helper()
	lag, err := c.metric("faultline_loki_lag_seconds", nil)
	if err != nil {
		t.Logf("%s: %v", when, err)
		return
	}
	read, _ := c.metric("faultline_loki_lines_total", nil)
	dups, _ := c.metric("faultline_loki_duplicates_total", nil)
	missed, _ := c.metric("faultline_loki_tail_missed_lines_total", nil)
	var reconnects []string
	for _, reason := range []string{"error", "closed", "dropped", "read_limit"} {
		if n, _ := c.metric("faultline_loki_reconnects_total", map[string]string{"reason": reason}); n > 0 {
			reconnects = append(reconnects, fmt.Sprintf("%s %.0f", reason, n))
		}
	}
	t.Logf("%s: controller read %.0f candidate lines (and %.0f again; %.0f found by the poll that the tail missed), reading lag %.1f s (summed over queries), reconnects %v",
		when, read, dups, missed, lag, reconnects)
}

// logLokiQueries logs how many query_range requests Loki answered and how long
// they took, to tell Loki's share of a slow read.
func logLokiQueries(t *testing.T, lokiURL string) {
	t.Helper()
	fams, err := scrapeURL(lokiURL + "/metrics")
	if err != nil {
		t.Logf("Loki's metrics: %v", err)
		return
	}
	var n uint64
	var secs float64
	for _, m := range fams["loki_request_duration_seconds"].GetMetric() {
		route, method := "", ""
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "route":
				route = lp.GetValue()
			case "method":
				method = lp.GetValue()
			}
		}
		if route == "loki_api_v1_query_range" && method == "POST" { // the controller's; GET: the frontend's splits
			n += m.GetHistogram().GetSampleCount()
			secs += m.GetHistogram().GetSampleSum()
		}
	}
	if n > 0 {
		t.Logf("Loki answered %d query_range requests in %.1f s (mean %.0f ms)", n, secs, 1000*secs/float64(n))
	}
}

func (c *controllerProc) scrape() (map[string]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fams != nil && time.Since(c.scraped) < scrapeEvery {
		return c.fams, nil
	}
	fams, err := scrapeURL("http://" + c.addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c.fams, c.scraped = fams, time.Now()
	return fams, nil
}

func scrapeURL(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse metrics of %s: %w", url, err)
	}
	return fams, nil
}

// syncBuffer is a bytes.Buffer the process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func mib(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }

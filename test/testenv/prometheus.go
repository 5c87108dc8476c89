package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/test/eventually"
)

// PrometheusOptions configures the test Prometheus.
type PrometheusOptions struct {
	// Targets are scraped from the start; more can be added with AddScrapeTarget.
	Targets []ScrapeTarget
	// ScrapeInterval defaults to 1s (also the evaluation interval).
	ScrapeInterval time.Duration
}

// ScrapeTarget is one static scrape target.
type ScrapeTarget struct {
	Job         string // job label; default "faultline"
	Address     string // host:port, e.g. 127.0.0.1:9100
	MetricsPath string // default /metrics
}

type promState struct {
	url      string
	cfgPath  string
	interval time.Duration
	targets  []ScrapeTarget
}

func (st *promState) config() string {
	ms := st.interval.Milliseconds()
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %[1]dms\n  scrape_timeout: %[1]dms\n  evaluation_interval: %[1]dms\nscrape_configs:\n", ms)
	type key struct{ job, path string }
	var keys []key
	groups := map[key][]string{}
	for _, tg := range st.targets {
		k := key{tg.Job, tg.MetricsPath}
		if k.job == "" {
			k.job = "faultline"
		}
		if k.path == "" {
			k.path = "/metrics"
		}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], tg.Address)
	}
	// One scrape config per job and path; job names must be unique, so a job scraped
	// on two paths gets the path appended.
	seen := map[string]int{}
	for _, k := range keys {
		name := k.job
		if seen[k.job]++; seen[k.job] > 1 {
			name = fmt.Sprintf("%s-%d", k.job, seen[k.job])
		}
		quoted := make([]string, len(groups[k]))
		for i, a := range groups[k] {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		fmt.Fprintf(&b, "  - job_name: %q\n    metrics_path: %q\n    static_configs:\n      - targets: [%s]\n", name, k.path, strings.Join(quoted, ", "))
		if name != k.job {
			fmt.Fprintf(&b, "        labels: {job: %q}\n", k.job)
		}
	}
	return b.String()
}

func (e *Env) startPrometheus(bin string, o PrometheusOptions) error {
	dir := filepath.Join(e.dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	st := &promState{cfgPath: filepath.Join(dir, "prometheus.yml"), interval: o.ScrapeInterval, targets: append([]ScrapeTarget(nil), o.Targets...)}
	if st.interval <= 0 {
		st.interval = time.Second
	}
	if err := os.WriteFile(st.cfgPath, []byte(st.config()), 0o644); err != nil {
		return err
	}
	err := e.launch(Prometheus, func() (procSpec, error) {
		ports, err := freePorts(1)
		if err != nil {
			return procSpec{}, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		st.url = "http://" + addr
		return procSpec{
			name: Prometheus, path: bin, dir: dir, logPath: e.LogPath(Prometheus),
			args: []string{
				"--config.file=" + st.cfgPath,
				"--storage.tsdb.path=" + filepath.Join(dir, "data"),
				"--web.listen-address=" + addr,
				"--web.enable-lifecycle",
				"--log.level=warn",
			},
			ready:        httpReady(http.DefaultClient, st.url+"/-/ready", nil, ""),
			readyTimeout: 60 * time.Second,
			stopGrace:    10 * time.Second,
		}, nil
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.prom = st
	e.mu.Unlock()
	return nil
}

func (e *Env) promOrPanic() *promState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prom == nil {
		panic("testenv: Prometheus was not started (set Options.Prometheus)")
	}
	return e.prom
}

// PrometheusURL returns Prometheus's base URL (http://127.0.0.1:<port>).
func (e *Env) PrometheusURL() string { return e.promOrPanic().url }

// AddScrapeTarget adds targets to the running Prometheus (rewrites its configuration
// and POSTs /-/reload) and waits until Prometheus lists them as active targets. Use it
// when the thing to scrape starts after Prometheus.
func (e *Env) AddScrapeTarget(t TB, targets ...ScrapeTarget) {
	t.Helper()
	st := e.promOrPanic()
	e.mu.Lock()
	st.targets = append(st.targets, targets...)
	cfg := st.config()
	e.mu.Unlock()
	if err := os.WriteFile(st.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatalf("testenv: write prometheus config: %v", err)
	}
	resp, err := http.Post(st.url+"/-/reload", "", nil)
	if err != nil {
		t.Fatalf("testenv: prometheus reload: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: prometheus reload: %s: %s", resp.Status, body)
	}
	// The scrape manager applies new target sets at most every 5 s.
	eventually.NoError(t, 30*time.Second, "prometheus to pick up the new targets", func() error {
		missing, err := missingTargets(st.url, targets)
		if err == nil && len(missing) > 0 {
			err = fmt.Errorf("missing %v", missing)
		}
		return err
	})
}

func missingTargets(base string, want []ScrapeTarget) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/targets?state=active", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	var missing []string
	for _, w := range want {
		path := w.MetricsPath
		if path == "" {
			path = "/metrics"
		}
		u := "http://" + w.Address + path
		found := false
		for _, a := range r.Data.ActiveTargets {
			if a.ScrapeURL == u {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, u)
		}
	}
	return missing, nil
}

package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

type otelState struct {
	url string // http://127.0.0.1:<port> of the OTLP/HTTP receiver
}

// collectorConfig: OTLP/HTTP in, a short batch, out to Loki's native OTLP endpoint
// (the otlphttp exporter appends /v1/logs) and to the debug exporter (the log file).
// The collector's own metrics are off, so it binds no port besides the receiver's.
const collectorConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d%[3]s
processors:
  batch:
    timeout: 200ms
exporters:
  otlphttp/loki:
    endpoint: %[2]s/otlp
    retry_on_failure:
      enabled: true
      initial_interval: 200ms
      max_interval: 1s
      max_elapsed_time: 2m
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp/loki, debug]
`

func (e *Env) startCollector(bin string, maxBody int) error {
	var extra string
	if maxBody > 0 {
		extra = fmt.Sprintf("\n        max_request_body_size: %d", maxBody)
	}
	dir := filepath.Join(e.dir, "otelcol")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	lokiURL := e.LokiURL()
	st := &otelState{}
	err := e.launch(Collector, func() (procSpec, error) {
		ports, err := freePorts(1)
		if err != nil {
			return procSpec{}, err
		}
		if err := os.WriteFile(cfgPath, fmt.Appendf(nil, collectorConfig, ports[0], lokiURL, extra), 0o644); err != nil {
			return procSpec{}, err
		}
		st.url = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		return procSpec{
			name: Collector, path: bin, dir: dir, logPath: e.LogPath(Collector),
			args:         []string{"--config=" + cfgPath},
			ready:        listening(st.url + "/v1/logs"),
			readyTimeout: 30 * time.Second,
			stopGrace:    10 * time.Second,
		}, nil
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.otel = st
	e.mu.Unlock()
	return nil
}

// listening is ready as soon as the URL answers HTTP at all (the collector starts its
// receivers last, once the pipeline behind them runs).
func listening(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
}

// OTLPEndpoint returns the base URL of the collector's OTLP/HTTP receiver
// (http://127.0.0.1:<port>); logs go to OTLPEndpoint()+"/v1/logs".
func (e *Env) OTLPEndpoint() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.otel == nil {
		panic("testenv: the collector was not started (set Options.Collector)")
	}
	return e.otel.url
}

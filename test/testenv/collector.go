package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

type otelState struct {
	url        string // http://127.0.0.1:<port> of the OTLP/HTTP receiver
	metricsURL string // the collector's own metrics (only with CollectorAuth)
}

// CollectorAudience is the token audience the chart's exporters are issued and the
// test collector's authenticator requires by default.
const CollectorAudience = "faultline-collector"

// CollectorAuth configures the collector's exporter authentication: the receiver
// takes only requests with a bearer token of one of ServiceAccounts, issued for
// Audience and bound to a pod on a node (faultline's faultlineauth extension, which
// reviews tokens with the test apiserver), and the faultlinenode processor writes
// that node into every record. The collector's own metrics are served then
// (CollectorMetricsURL).
type CollectorAuth struct {
	Audience        string   // default CollectorAudience
	ServiceAccounts []string // namespace/name of the exporters' ServiceAccounts
}

// collectorBatchAndExporters is the batch processor and the exporters both
// configurations share; %[2]s is Loki's URL.
const collectorBatchAndExporters = `  batch:
    timeout: 200ms
%[8]sexporters:
  otlphttp/loki:
    endpoint: %[2]s/otlp
    retry_on_failure:
      enabled: true
      initial_interval: 200ms
      max_interval: 1s
      max_elapsed_time: 2m
  debug:
    verbosity: basic
%[9]s`

// collectorConfig: OTLP/HTTP in, a short batch, out to Loki's native OTLP endpoint
// (the otlphttp exporter appends /v1/logs) and to the debug exporter (the log file).
// The collector's own metrics are off, so it binds no port besides the receiver's.
const collectorConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d%[3]s
processors:
` + collectorBatchAndExporters + `service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp/loki, debug]
%[10]s`

// collectorAuthConfig replaces the receiver, pipeline and telemetry parts of
// collectorConfig for CollectorAuth; %[3]d is the metrics port, %[4]s the kubeconfig,
// %[5]s the audience, %[6]s the ServiceAccounts (a YAML flow list), %[7]s the receiver's
// extra settings.
const collectorAuthConfig = `extensions:
  faultlineauth:
    kubeconfig: %[4]s
    audiences: [%[5]s]
    service_accounts: %[6]s
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d%[7]s
        auth:
          authenticator: faultlineauth
processors:
  faultlinenode:
` + collectorBatchAndExporters + `service:
  extensions: [faultlineauth]
  telemetry:
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %[3]d
  pipelines:
    logs:
      receivers: [otlp]
      processors: [faultlinenode, batch]
      exporters: [otlphttp/loki, debug]
%[11]s`

// CollectorIntake makes the collector send every log record to the controller's
// intake as well as to Loki, as the chart configures it: a pipeline of its own with
// a short batch, over TLS, with a bearer token.
type CollectorIntake struct {
	Endpoint string // https://127.0.0.1:<port> (the exporter appends /v1/logs)
	CAFile   string // the CA that signed the intake's certificate
	// Token returns the bearer token (a ServiceAccount token of the intake's
	// audience), once the apiserver runs.
	Token        func(*Env) (string, error)
	BatchTimeout time.Duration // default 50ms
}

// intakeParts are the processor, exporter and pipeline the intake adds (%[8]s,
// %[9]s, and %[10]s or %[11]s with the node processor), or empty strings.
func (e *Env) intakeParts(in *CollectorIntake) (processor, exporter, pipeline, authPipeline string, err error) {
	if in == nil {
		return "", "", "", "", nil
	}
	token, err := in.Token(e)
	if err != nil {
		return "", "", "", "", fmt.Errorf("the intake's token: %w", err)
	}
	bt := in.BatchTimeout
	if bt <= 0 {
		bt = 50 * time.Millisecond
	}
	processor = fmt.Sprintf("  batch/controller:\n    timeout: %s\n", bt)
	exporter = fmt.Sprintf(`  otlphttp/controller:
    endpoint: %s
    tls:
      ca_file: %s
    headers:
      Authorization: "Bearer %s"
    retry_on_failure:
      enabled: true
      initial_interval: 100ms
      max_interval: 1s
      max_elapsed_time: 5s
    sending_queue:
      enabled: true
      queue_size: 1000
`, in.Endpoint, in.CAFile, token)
	pl := `    logs/controller:
      receivers: [otlp]
      processors: [%sbatch/controller]
      exporters: [otlphttp/controller]
`
	return processor, exporter, fmt.Sprintf(pl, ""), fmt.Sprintf(pl, "faultlinenode, "), nil
}

func (e *Env) startCollector(bin string, maxBody int, auth *CollectorAuth, in *CollectorIntake) error {
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
	var kubeconfig string
	if auth != nil {
		kubeconfig = e.Kubeconfig()
	}
	st := &otelState{}
	err := e.launch(Collector, func() (procSpec, error) {
		ports, err := freePorts(2)
		if err != nil {
			return procSpec{}, err
		}
		proc, exp, pl, authPl, err := e.intakeParts(in)
		if err != nil {
			return procSpec{}, err
		}
		cfg := fmt.Appendf(nil, collectorConfig, ports[0], lokiURL, extra, "", "", "", "", proc, exp, pl, authPl)
		if auth != nil {
			aud := auth.Audience
			if aud == "" {
				aud = CollectorAudience
			}
			sas, err := json.Marshal(auth.ServiceAccounts)
			if err != nil {
				return procSpec{}, err
			}
			cfg = fmt.Appendf(nil, collectorAuthConfig, ports[0], lokiURL, ports[1], kubeconfig, aud, sas, extra, proc, exp, pl, authPl)
			st.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
		}
		if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
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

// CollectorMetricsURL returns the URL of the collector's own Prometheus metrics
// (started with Options.CollectorAuth only).
func (e *Env) CollectorMetricsURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.otel == nil || e.otel.metricsURL == "" {
		panic("testenv: the collector's metrics are served only with Options.CollectorAuth")
	}
	return e.otel.metricsURL
}

package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
)

// LokiIndexLabels are the OTLP resource attributes the test Loki promotes to index
// labels. Loki sanitizes the names: k8s.node.name becomes the label k8s_node_name.
var LokiIndexLabels = []string{"k8s.node.name", "node", "source"}

type lokiState struct {
	url string // http://127.0.0.1:<port>
}

// lokiConfig is a single-binary Loki on loopback: in-memory ring, filesystem storage,
// TSDB schema v13, a WAL (so a restarted Loki still has what it ingested), no
// rejection of old samples, ingesters queried for any time range, structured metadata on, and the node attributes promoted
// to index labels for OTLP ingestion. The query frontend and querier talk to the
// scheduler at a fixed address instead of through the scheduler ring: with the ring,
// the scheduler accepts queries only after its first ring check (3 s after start) and
// the first query stalls for about 4 s.
const lokiConfig = `auth_enabled: false
server:
  http_listen_address: 127.0.0.1
  http_listen_port: %[1]d
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: %[2]d
  log_level: warn
common:
  instance_addr: 127.0.0.1
  path_prefix: %[3]s
  storage:
    filesystem:
      chunks_directory: %[3]s/chunks
      rules_directory: %[3]s/rules
  replication_factor: 1
  ring:
    kvstore:
      store: inmemory
ingester:
  lifecycler:
    min_ready_duration: 0s
  # A stream pushed with a month of old timestamps stays one chunk in the ingester,
  # where queries see it, instead of chunks cut every 2h of line time and flushed to
  # an index the querier reads only after it is shipped.
  max_chunk_age: 1000h
  wal:
    enabled: true
    dir: %[3]s/wal
frontend:
  scheduler_dns_lookup_period: 500ms
  scheduler_address: 127.0.0.1:%[2]d
frontend_worker:
  dns_lookup_duration: 200ms
  scheduler_address: 127.0.0.1:%[2]d
query_scheduler:
  use_scheduler_ring: false
querier:
  # Lines pushed with old timestamps (a month of history for replay tests) stay in
  # the ingester until flushed; by default only the last 3h are asked of it.
  query_ingesters_within: 0
schema_config:
  configs:
    - from: 2024-01-01
      store: tsdb
      object_store: filesystem
      schema: v13
      index:
        prefix: index_
        period: 24h
limits_config:
  allow_structured_metadata: true
  # One stream per node and source: a fleet of 20,000 nodes is over Loki's default 5,000.
  max_global_streams_per_user: 0
  reject_old_samples: false
  otlp_config:
    resource_attributes:
      attributes_config:
        - action: index_label
          attributes: [%[4]s]
%[5]squery_range:
  results_cache:
    cache:
      embedded_cache:
        enabled: true
        max_size_mb: 50
analytics:
  reporting_enabled: false
`

func (e *Env) startLoki(bin string, limits map[string]string, indexLabels []string) error {
	dir := filepath.Join(e.dir, "loki")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "loki.yaml")
	ls := &lokiState{}
	attrs := ""
	if indexLabels == nil {
		indexLabels = LokiIndexLabels
	}
	for i, a := range indexLabels {
		if i > 0 {
			attrs += ", "
		}
		attrs += fmt.Sprintf("%q", a)
	}
	names := slices.Sorted(maps.Keys(limits))
	extra := ""
	for _, n := range names {
		extra += fmt.Sprintf("  %s: %s\n", n, limits[n])
	}
	err := e.launch(Loki, func() (procSpec, error) {
		ports, err := freePorts(2)
		if err != nil {
			return procSpec{}, err
		}
		if err := os.WriteFile(cfgPath, fmt.Appendf(nil, lokiConfig, ports[0], ports[1], dir, attrs, extra), 0o644); err != nil {
			return procSpec{}, err
		}
		ls.url = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		return procSpec{
			name: Loki, path: bin, dir: dir, logPath: e.LogPath(Loki),
			args:         []string{"-config.file=" + cfgPath},
			ready:        lokiReady(ls.url),
			readyTimeout: 60 * time.Second,
			stopGrace:    15 * time.Second,
		}, nil
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.loki = ls
	e.mu.Unlock()
	return nil
}

// lokiReady waits for /ready and then for a query to pass through the query frontend,
// scheduler and querier: /ready turns 200 before the querier's worker has connected,
// and the first query would otherwise wait for it.
func lokiReady(base string) func(context.Context) error {
	ready := httpReady(http.DefaultClient, base+"/ready", nil, "ready")
	return func(ctx context.Context) error {
		if err := ready(ctx); err != nil {
			return err
		}
		now := time.Now()
		q := url.Values{"query": {`{testenv="ready"}`}, "limit": {"1"},
			"start": {strconv.FormatInt(now.Add(-time.Hour).UnixNano(), 10)}, "end": {strconv.FormatInt(now.UnixNano(), 10)}}
		return httpReady(http.DefaultClient, base+"/loki/api/v1/query_range?"+q.Encode(), nil, `"status":"success"`)(ctx)
	}
}

// LokiURL returns Loki's base URL (http://127.0.0.1:<port>): push to
// /loki/api/v1/push, query /loki/api/v1/query_range, OTLP at /otlp/v1/logs.
func (e *Env) LokiURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loki == nil {
		panic("testenv: Loki was not started (set Options.Loki)")
	}
	return e.loki.url
}

// PushLoki pushes streams to the Loki at base (its base URL) with the native push
// API (protobuf, snappy); Loki's refusal comes back as an error with its answer.
func PushLoki(base string, streams []push.Stream) error {
	b, err := (&push.PushRequest{Streams: streams}).Marshal()
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	resp, err := http.Post(base+"/loki/api/v1/push", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, b)))
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("push: %s: %s", resp.Status, body)
	}
	return nil
}

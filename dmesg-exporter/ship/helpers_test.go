package ship

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
)

// t0 is a fixed record time with sub-microsecond precision, to catch truncation.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.UTC)

// captured is one request a fake receiver got.
type captured struct {
	Method, Path string
	Header       http.Header
	Body         []byte // as sent (compressed)
}

// receiver is an httptest server that records requests and answers with the
// statuses in replies, one per request (the last one repeats; default 200).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []captured
	replies []reply
}

type reply struct {
	status int
	body   string
	header map[string]string
	delay  time.Duration
}

func newReceiver(t *testing.T, replies ...reply) *receiver {
	t.Helper()
	rc := &receiver{replies: replies}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("receiver: read body: %v", err)
		}
		rc.mu.Lock()
		n := len(rc.reqs)
		rc.reqs = append(rc.reqs, captured{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		rp := reply{status: http.StatusOK}
		if len(rc.replies) > 0 {
			rp = rc.replies[min(n, len(rc.replies)-1)]
		}
		rc.mu.Unlock()
		if rp.delay > 0 {
			select {
			case <-time.After(rp.delay):
			case <-r.Context().Done():
				return
			}
		}
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rp.status)
		io.WriteString(w, rp.body)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []captured {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]captured(nil), rc.reqs...)
}

// decodeOTLP decodes an OTLP/HTTP request body the way the collector does.
func decodeOTLP(t *testing.T, c captured) plog.Logs {
	t.Helper()
	body := c.Body
	if c.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("gunzip: %v", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("gunzip: %v", err)
		}
	}
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		t.Fatalf("unmarshal ExportLogsServiceRequest: %v", err)
	}
	return req.Logs()
}

// decodeLoki decodes a Loki push request body the way Loki does.
func decodeLoki(t *testing.T, c captured) push.PushRequest {
	t.Helper()
	raw, err := snappy.Decode(nil, c.Body)
	if err != nil {
		t.Fatalf("snappy decode: %v", err)
	}
	var req push.PushRequest
	if err := req.Unmarshal(raw); err != nil {
		t.Fatalf("unmarshal PushRequest: %v", err)
	}
	return req
}

// parseLabels parses a Loki stream selector {a="x", b="y"}, unquoting values
// with strconv (the escaping Prometheus/LogQL label syntax uses).
func parseLabels(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		t.Fatalf("labels %q: not {...}", s)
	}
	rest := strings.TrimSpace(s[1 : len(s)-1])
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			t.Fatalf("labels %q: no '=' in %q", s, rest)
		}
		name := strings.TrimSpace(rest[:eq])
		q, err := strconv.QuotedPrefix(rest[eq+1:])
		if err != nil {
			t.Fatalf("labels %q: value of %s: %v", s, name, err)
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("labels %q: unquote %s: %v", s, q, err)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("labels %q: duplicate %s", s, name)
		}
		out[name] = v
		rest = strings.TrimSpace(rest[eq+1+len(q):])
		if rest != "" {
			if rest[0] != ',' {
				t.Fatalf("labels %q: want ',' at %q", s, rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	return out
}

func metaMap(ls push.LabelsAdapter) map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

func equalMaps[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sampleRecords is a batch mixing kernel records of two nodes and pod records
// of two containers, deliberately out of time order.
func sampleRecords() []Record {
	boot := "3f2e1d9c-8b7a-4c5d-9e0f-123456789abc"
	return []Record{
		{Time: t0.Add(2 * time.Second), Body: "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
			Source: SourceKernel, Node: "gpu-1", Seq: 1002, BootID: boot, Level: 3, Facility: 0},
		{Time: t0, Body: "mlx5_core 0000:5e:00.0: Port: 1 Link DOWN",
			Source: SourceKernel, Node: "gpu-1", Seq: 1001, BootID: boot, Level: 4, Facility: 0},
		{Time: t0.Add(time.Second), Body: "NCCL WARN Call to ibv_poll_cq failed", Source: SourcePod, Node: "gpu-1",
			Namespace: "train", Pod: "llm-0", Container: "trainer", Stream: "stderr"},
		{Time: t0.Add(time.Second), Body: "step 1200 loss 2.31", Source: SourcePod, Node: "gpu-1",
			Namespace: "train", Pod: "llm-0", Container: "trainer", Stream: "stdout"},
		{Time: t0.Add(3 * time.Second), Body: "sidecar ready", Source: SourcePod, Node: "gpu-1",
			Namespace: "train", Pod: "llm-0", Container: "sidecar", Stream: "stdout"},
		{Time: t0.Add(2 * time.Second), Body: "Kernel panic - not syncing: Fatal exception",
			Source: SourceKernel, Node: "gpu-2", Seq: 7, BootID: boot, Level: 0, Facility: 0},
		// Same timestamp as seq 1002: must stay after it (stable sort).
		{Time: t0.Add(2 * time.Second), Body: "NVRM: GPU at PCI:0000:3b:00: GPU-0d4e has fallen off the bus.",
			Source: SourceKernel, Node: "gpu-1", Seq: 1003, BootID: boot, Level: 3, Facility: 0},
		{Time: t0.Add(4 * time.Second), Body: "systemd[1]: Started foo", Source: SourceKernel, Node: "gpu-1",
			Seq: 1004, BootID: boot, Level: 6, Facility: 3},
	}
}

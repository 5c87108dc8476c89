package intake

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/logstream"
)

// authz answers every review with err (nil: allowed) and records the action.
type authz struct {
	err  error
	seen []kubeauth.Action
}

func (a *authz) Authorize(_ context.Context, token string, act kubeauth.Action) (string, error) {
	a.seen = append(a.seen, act)
	if token == "" {
		return "", kubeauth.ErrUnauthenticated
	}
	return "collector", a.err
}

type fixture struct {
	srv       *Server
	auth      *authz
	m         *Metrics
	delivered [][]logstream.Line
	deliver   error
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{auth: &authz{}, m: NewMetrics(prometheus.NewRegistry())}
	cfg.Auth, cfg.Metrics = f.auth, f.m
	cfg.Deliver = func(_ context.Context, lines []logstream.Line) error {
		if f.deliver != nil {
			return f.deliver
		}
		f.delivered = append(f.delivered, lines)
		return nil
	}
	if cfg.Lines.NodeLabel == "" {
		cfg.Lines = Converter{NodeLabel: logstream.LabelNode, Sources: []string{logstream.SourceKernel, logstream.SourceProbe}}
	}
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	return f
}

func (f *fixture) post(body []byte, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/x-protobuf")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// kernelLogs is a request as the collector sends it: the dmesg-exporter's
// attributes after the node processor.
func kernelLogs(node string, at time.Time, lines ...string) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	ra := rl.Resource().Attributes()
	if node != "" {
		ra.PutStr(logstream.AttrK8sNodeName, node)
		ra.PutStr(logstream.AttrNode, node)
	}
	ra.PutStr(logstream.AttrSource, logstream.SourceKernel)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i, l := range lines {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i) * time.Millisecond)))
		lr.Body().SetStr(l)
		a := lr.Attributes()
		a.PutStr(logstream.AttrLogSource, logstream.SourceKernel)
		a.PutStr(logstream.AttrBootID, "b-1")
		a.PutInt(logstream.AttrKmsgSeq, int64(100+i))
	}
	return ld
}

func proto(t *testing.T, ld plog.Logs) []byte {
	t.Helper()
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAccepted(t *testing.T) {
	f := newFixture(t, Config{})
	at := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	rec := f.post(proto(t, kernelLogs("gpu-1", at, "NVRM: Xid 79", "second")), nil)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("answered %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if err := plogotlp.NewExportResponse().UnmarshalProto(rec.Body.Bytes()); err != nil {
		t.Errorf("the answer is not an ExportLogsServiceResponse: %v", err)
	}
	if len(f.delivered) != 1 || len(f.delivered[0]) != 2 {
		t.Fatalf("delivered %v", f.delivered)
	}
	l := f.delivered[0][0]
	if l.Node != "gpu-1" || l.Source != logstream.SourceKernel || l.Query != logstream.SourceKernel || l.Text != "NVRM: Xid 79" ||
		!l.Time.Equal(at) || l.Labels[logstream.MetaBootID] != "b-1" || l.Labels["kmsg_seq"] != "100" ||
		l.Labels["k8s_node_name"] != "gpu-1" || l.Stream != `{k8s_node_name="gpu-1", node="gpu-1", source="kernel"}` {
		t.Errorf("line = %+v", l)
	}
	if got := f.delivered[0][1].Time; !got.Equal(at.Add(time.Millisecond)) {
		t.Errorf("second line at %s", got)
	}
	if len(f.auth.seen) != 1 || f.auth.seen[0] != (kubeauth.Action{Verb: "create", Resource: "loglines"}) {
		t.Errorf("authorized %v", f.auth.seen)
	}
	if got := testutil.ToFloat64(f.m.Lines.WithLabelValues("kernel")); got != 2 {
		t.Errorf("lines counted %v", got)
	}
	if got := testutil.ToFloat64(f.m.Requests.WithLabelValues("200")); got != 1 {
		t.Errorf("requests counted %v", got)
	}

	// JSON and gzip, as OTLP/HTTP allows.
	js, err := plogotlp.NewExportRequestFromLogs(kernelLogs("gpu-2", at, "x")).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(js)
	zw.Close()
	rec = f.post(gz.Bytes(), map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"})
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || len(f.delivered) != 2 || f.delivered[1][0].Node != "gpu-2" {
		t.Errorf("gzipped JSON: %d %s, delivered %v", rec.Code, rec.Body, f.delivered)
	}
}

// TestSkipped: records that are not lines the controller reads are counted by
// reason, never delivered, and the request still succeeds (a retry would not help).
func TestSkipped(t *testing.T) {
	f := newFixture(t, Config{})
	ld := kernelLogs("", time.Now(), "no node")
	kernelLogs("gpu-1", time.Now(), "").ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	pod := kernelLogs("gpu-1", time.Now(), "a pod line")
	pod.ResourceLogs().At(0).Resource().Attributes().PutStr(logstream.AttrSource, logstream.SourcePod)
	pod.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	future := kernelLogs("gpu-1", time.Now().Add(time.Hour), "from the future")
	future.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	before := time.Now()
	rec := f.post(proto(t, ld), nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("answered %d: %s", rec.Code, rec.Body)
	}
	for reason, want := range map[string]float64{SkipNoNode: 1, SkipNoText: 1, SkipNoSource: 1} {
		if got := testutil.ToFloat64(f.m.Skipped.WithLabelValues(reason)); got != want {
			t.Errorf("skipped %s: %v, want %v", reason, got, want)
		}
	}
	if len(f.delivered) != 1 || len(f.delivered[0]) != 1 {
		t.Fatalf("delivered %v", f.delivered)
	}
	if at := f.delivered[0][0].Time; at.Before(before) || at.After(time.Now()) {
		t.Errorf("a line from the future dated %s, want the time it arrived", at)
	}
}

func TestRefused(t *testing.T) {
	big := proto(t, kernelLogs("gpu-1", time.Now(), strings.Repeat("x", 4096)))
	var bomb bytes.Buffer // small compressed, large decompressed
	zw := gzip.NewWriter(&bomb)
	zw.Write(bytes.Repeat([]byte{0}, 1<<20))
	zw.Close()
	for _, tc := range []struct {
		name    string
		cfg     Config
		authErr error
		deliver error
		body    []byte
		header  map[string]string
		want    int
		retry   bool
	}{
		{name: "no token", header: map[string]string{"Authorization": ""}, want: http.StatusUnauthorized},
		{name: "forbidden", authErr: kubeauth.ErrForbidden, want: http.StatusForbidden},
		{name: "reviews spent", authErr: &kubeauth.RateLimitError{RetryAfter: 3 * time.Second}, want: http.StatusTooManyRequests, retry: true},
		{name: "apiserver down", authErr: errors.New("connection refused"), want: http.StatusServiceUnavailable, retry: true},
		{name: "GET", header: map[string]string{"X-Method": "GET"}, want: http.StatusMethodNotAllowed},
		{name: "content type", header: map[string]string{"Content-Type": "text/plain"}, want: http.StatusUnsupportedMediaType},
		{name: "encoding", header: map[string]string{"Content-Encoding": "br"}, want: http.StatusUnsupportedMediaType},
		{name: "not OTLP", body: []byte("\xff\xff\xff"), want: http.StatusBadRequest},
		{name: "body too large", cfg: Config{MaxBodyBytes: 1024}, body: big, want: http.StatusRequestEntityTooLarge},
		{name: "decompressed too large", cfg: Config{MaxDecodedBytes: 64 << 10}, body: bomb.Bytes(), header: map[string]string{"Content-Encoding": "gzip"}, want: http.StatusRequestEntityTooLarge},
		{name: "too many records", cfg: Config{MaxRecords: 1}, body: proto(t, kernelLogs("gpu-1", time.Now(), "a", "b")), want: http.StatusRequestEntityTooLarge},
		{name: "not leading", deliver: ErrNotLeading, want: http.StatusServiceUnavailable, retry: true},
		{name: "not decided", deliver: context.Canceled, want: http.StatusServiceUnavailable, retry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			f.auth.err, f.deliver = tc.authErr, tc.deliver
			body := tc.body
			if body == nil {
				body = proto(t, kernelLogs("gpu-1", time.Now(), "line"))
			}
			var rec *httptest.ResponseRecorder
			if tc.header["X-Method"] == "GET" {
				req := httptest.NewRequest(http.MethodGet, Path, nil)
				rec = httptest.NewRecorder()
				f.srv.Handler().ServeHTTP(rec, req)
			} else {
				rec = f.post(body, tc.header)
			}
			if rec.Code != tc.want {
				t.Fatalf("answered %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tc.want)
			}
			if got := rec.Header().Get("Retry-After") != ""; got != tc.retry {
				t.Errorf("Retry-After %q, want one: %v", rec.Header().Get("Retry-After"), tc.retry)
			}
			if tc.deliver == nil && len(f.delivered) != 0 {
				t.Errorf("refused, but delivered %v", f.delivered)
			}
			if got := testutil.ToFloat64(f.m.Requests.WithLabelValues(strconv.Itoa(tc.want))); got != 1 {
				t.Errorf("requests counted under %d: %v", tc.want, got)
			}
		})
	}
}

func TestLabelName(t *testing.T) {
	for in, want := range map[string]string{"k8s.node.name": "k8s_node_name", "boot.id": "boot_id", "node": "node", "9lives": "key_9lives", "a-b/c": "a_b_c"} {
		if got := LabelName(in); got != want {
			t.Errorf("LabelName(%q) = %q, want %q", in, got, want)
		}
	}
}

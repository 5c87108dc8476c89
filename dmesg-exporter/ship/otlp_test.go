package ship

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
)

func TestOTLPSendEncodesEveryField(t *testing.T) {
	rc := newReceiver(t)
	s := NewOTLP(rc.URL, OTLPOptions{Gzip: true, Headers: map[string]string{"Authorization": "Bearer tok"}})
	observed := t0.Add(time.Minute)
	s.(*OTLP).now = func() time.Time { return observed }
	recs := sampleRecords()
	if err := s.Send(context.Background(), recs); err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	c := reqs[0]
	if c.Method != http.MethodPost || c.Path != "/v1/logs" {
		t.Errorf("request %s %s, want POST /v1/logs", c.Method, c.Path)
	}
	for k, want := range map[string]string{
		"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip", "Authorization": "Bearer tok",
	} {
		if got := c.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	ld := decodeOTLP(t, c)
	if ld.LogRecordCount() != len(recs) {
		t.Fatalf("LogRecordCount = %d, want %d", ld.LogRecordCount(), len(recs))
	}

	type wantRes struct {
		attrs map[string]any
		recs  []int // indexes into recs, in order
	}
	gpu1 := map[string]any{"k8s.node.name": "gpu-1", "host.name": "gpu-1", "node": "gpu-1", "source": "kernel"}
	pod := func(container string) map[string]any {
		return map[string]any{"k8s.node.name": "gpu-1", "host.name": "gpu-1", "node": "gpu-1", "source": "pod",
			"k8s.namespace.name": "train", "k8s.pod.name": "llm-0", "k8s.container.name": container}
	}
	want := []wantRes{
		{gpu1, []int{0, 1, 6, 7}},
		{pod("trainer"), []int{2, 3}},
		{pod("sidecar"), []int{4}},
		{map[string]any{"k8s.node.name": "gpu-2", "host.name": "gpu-2", "node": "gpu-2", "source": "kernel"}, []int{5}},
	}
	rls := ld.ResourceLogs()
	if rls.Len() != len(want) {
		t.Fatalf("%d ResourceLogs, want %d", rls.Len(), len(want))
	}
	for i, w := range want {
		rl := rls.At(i)
		if got := rl.Resource().Attributes().AsRaw(); !reflect.DeepEqual(got, w.attrs) {
			t.Errorf("resource %d attributes = %v, want %v", i, got, w.attrs)
		}
		if rl.ScopeLogs().Len() != 1 {
			t.Fatalf("resource %d: %d ScopeLogs, want 1", i, rl.ScopeLogs().Len())
		}
		sl := rl.ScopeLogs().At(0)
		if sl.Scope().Name() != "faultline/dmesg-exporter" {
			t.Errorf("scope name %q", sl.Scope().Name())
		}
		lrs := sl.LogRecords()
		if lrs.Len() != len(w.recs) {
			t.Fatalf("resource %d: %d records, want %d", i, lrs.Len(), len(w.recs))
		}
		for j, ri := range w.recs {
			checkLogRecord(t, lrs.At(j), recs[ri], observed)
		}
	}
}

func checkLogRecord(t *testing.T, lr plog.LogRecord, r Record, observed time.Time) {
	t.Helper()
	if got := lr.Timestamp().AsTime(); !got.Equal(r.Time) {
		t.Errorf("%q: timestamp %v, want %v", r.Body, got, r.Time)
	}
	if got := lr.ObservedTimestamp().AsTime(); !got.Equal(observed) {
		t.Errorf("%q: observed timestamp %v, want %v", r.Body, got, observed)
	}
	if lr.Body().Type() != pcommon.ValueTypeStr || lr.Body().Str() != r.Body {
		t.Errorf("body %v %q, want string %q", lr.Body().Type(), lr.Body().AsString(), r.Body)
	}
	var attrs map[string]any
	var num plog.SeverityNumber
	var text string
	switch r.Source {
	case SourceKernel:
		attrs = map[string]any{"log.source": "kernel", "kmsg.seq": int64(r.Seq),
			"boot.id": r.BootID, "kmsg.facility": int64(r.Facility), "kmsg.level": int64(r.Level)}
		sev := KernelSeverity(r.Level)
		num, text = sev.Number, sev.Text
	case SourcePod:
		attrs = map[string]any{"log.source": "pod", "log.iostream": r.Stream}
		num, text = plog.SeverityNumberUnspecified, ""
	}
	if got := lr.Attributes().AsRaw(); !reflect.DeepEqual(got, attrs) {
		t.Errorf("%q: attributes %v, want %v", r.Body, got, attrs)
	}
	if lr.SeverityNumber() != num || lr.SeverityText() != text {
		t.Errorf("%q: severity %v %q, want %v %q", r.Body, lr.SeverityNumber(), lr.SeverityText(), num, text)
	}
}

func TestKernelSeverity(t *testing.T) {
	want := []struct {
		num  plog.SeverityNumber
		text string
	}{
		{plog.SeverityNumberFatal, "FATAL"}, {plog.SeverityNumberError3, "ERROR"}, {plog.SeverityNumberError2, "ERROR"},
		{plog.SeverityNumberError, "ERROR"}, {plog.SeverityNumberWarn, "WARN"}, {plog.SeverityNumberInfo2, "INFO"},
		{plog.SeverityNumberInfo, "INFO"}, {plog.SeverityNumberDebug, "DEBUG"},
	}
	for lvl, w := range want {
		got := KernelSeverity(lvl)
		if got.Number != w.num || got.Text != w.text {
			t.Errorf("KernelSeverity(%d) = %v %q, want %v %q", lvl, got.Number, got.Text, w.num, w.text)
		}
		// More severe syslog levels never map to a lower OTLP number.
		if lvl > 0 && got.Number >= KernelSeverity(lvl-1).Number {
			t.Errorf("KernelSeverity(%d) = %d not below level %d's %d", lvl, got.Number, lvl-1, KernelSeverity(lvl-1).Number)
		}
	}
	for _, lvl := range []int{-1, 8, 42} {
		if got := KernelSeverity(lvl); got.Number != plog.SeverityNumberUnspecified || got.Text != "" {
			t.Errorf("KernelSeverity(%d) = %+v, want unspecified", lvl, got)
		}
	}
}

func TestOTLPWithoutGzip(t *testing.T) {
	rc := newReceiver(t)
	s := NewOTLP(rc.URL+"/", OTLPOptions{})
	if err := s.Send(context.Background(), sampleRecords()[:1]); err != nil {
		t.Fatal(err)
	}
	c := rc.requests()[0]
	if ce := c.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("Content-Encoding %q, want none", ce)
	}
	if c.Path != "/v1/logs" {
		t.Errorf("path %q", c.Path)
	}
	if ld := decodeOTLP(t, c); ld.LogRecordCount() != 1 {
		t.Errorf("%d records", ld.LogRecordCount())
	}
}

func TestOTLPEndpointForms(t *testing.T) {
	for _, suffix := range []string{"", "/", "/v1/logs", "/v1/logs/"} {
		rc := newReceiver(t)
		s := NewOTLP(rc.URL+suffix, OTLPOptions{})
		if err := s.Send(context.Background(), sampleRecords()[:1]); err != nil {
			t.Fatal(err)
		}
		if p := rc.requests()[0].Path; p != "/v1/logs" {
			t.Errorf("endpoint %q: posted to %q", rc.URL+suffix, p)
		}
		if s.Name() != "otlp "+rc.URL+"/v1/logs" {
			t.Errorf("Name() = %q", s.Name())
		}
	}
}

func TestOTLPZeroTimeAndInvalidUTF8(t *testing.T) {
	rc := newReceiver(t)
	s := NewOTLP(rc.URL, OTLPOptions{Gzip: true})
	bad := "NVRM: Xid \xff\xfe 79"
	if err := s.Send(context.Background(), []Record{{Body: bad, Source: SourceKernel, Node: "n\xc0", Level: 9}}); err != nil {
		t.Fatal(err)
	}
	lr := decodeOTLP(t, rc.requests()[0]).ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	if lr.Timestamp() != 0 {
		t.Errorf("timestamp %v, want unset for a zero time", lr.Timestamp())
	}
	if lr.ObservedTimestamp() == 0 {
		t.Error("observed timestamp unset")
	}
	if got, want := lr.Body().Str(), "NVRM: Xid \uFFFD 79"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	if lr.SeverityNumber() != plog.SeverityNumberUnspecified {
		t.Errorf("severity %v for level 9", lr.SeverityNumber())
	}
}

func TestOTLPPartialSuccess(t *testing.T) {
	resp := plogotlp.NewExportResponse()
	resp.PartialSuccess().SetRejectedLogRecords(2)
	resp.PartialSuccess().SetErrorMessage("too old")
	pb, err := resp.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	js, err := resp.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ctype, body string }{{"application/x-protobuf", string(pb)}, {"application/json", string(js)}} {
		rc := newReceiver(t, reply{status: 200, body: tc.body, header: map[string]string{"Content-Type": tc.ctype}})
		err := NewOTLP(rc.URL, OTLPOptions{}).Send(context.Background(), sampleRecords())
		var pe *PartialSuccessError
		if !errors.As(err, &pe) || pe.Rejected != 2 || pe.Message != "too old" {
			t.Fatalf("%s: err = %v, want PartialSuccessError 2 too old", tc.ctype, err)
		}
		if Retryable(err) {
			t.Errorf("partial success is retryable")
		}
	}
	// An empty success response, or one that does not decode, is a success.
	empty, _ := plogotlp.NewExportResponse().MarshalProto()
	for _, body := range []string{string(empty), "not protobuf \xff\xff\xff"} {
		rc := newReceiver(t, reply{status: 200, body: body, header: map[string]string{"Content-Type": "application/x-protobuf"}})
		if err := NewOTLP(rc.URL, OTLPOptions{}).Send(context.Background(), sampleRecords()); err != nil {
			t.Errorf("body %q: %v", body, err)
		}
	}
}

func TestEmptyBatchSendsNothing(t *testing.T) {
	rc := newReceiver(t)
	for _, s := range []Sender{NewOTLP(rc.URL, OTLPOptions{}), NewLoki(rc.URL, LokiOptions{})} {
		if err := s.Send(context.Background(), nil); err != nil {
			t.Errorf("%s: %v", s.Name(), err)
		}
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("%d requests for empty batches", n)
	}
}

package ship

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/faultline-dev/faultline/logstream"
)

// ScopeName is the instrumentation scope of every log record the OTLP sender builds.
const ScopeName = "faultline/dmesg-exporter"

// OTLP resource attributes.
const (
	AttrK8sNodeName      = logstream.AttrK8sNodeName
	AttrHostName         = logstream.AttrHostName
	AttrNode             = logstream.AttrNode
	AttrK8sNamespaceName = logstream.AttrK8sNamespaceName
	AttrK8sPodName       = logstream.AttrK8sPodName
	AttrK8sContainerName = logstream.AttrK8sContainerName
)

// OTLP log record attributes.
const (
	AttrLogSource    = logstream.AttrLogSource
	AttrSource       = logstream.AttrSource // resource attribute
	AttrKmsgSeq      = logstream.AttrKmsgSeq
	AttrBootID       = logstream.AttrBootID
	AttrKmsgFacility = logstream.AttrKmsgFacility
	AttrKmsgLevel    = logstream.AttrKmsgLevel
	AttrLogIOStream  = logstream.AttrLogIOStream
)

// OTLPOptions configures the OTLP/HTTP sender.
type OTLPOptions struct {
	// Gzip compresses request bodies (Content-Encoding: gzip). The zero value
	// sends them uncompressed; the dmesg-exporter command turns it on unless
	// --no-gzip is given.
	Gzip bool
	// Headers are added to every request (e.g. an Authorization header).
	Headers map[string]string
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Client sends the requests (default: a client on http.DefaultTransport).
	// Its own Timeout, if any, applies too.
	Client *http.Client
}

// OTLP sends logs as OTLP/HTTP protobuf, POST <endpoint>/v1/logs.
type OTLP struct {
	p    *poster
	gzip bool
	now  func() time.Time
}

// NewOTLP returns a sender that posts to endpoint+"/v1/logs" (an endpoint that
// already ends in /v1/logs is used as is), e.g. http://otel-collector:4318.
//
// Each batch becomes one ExportLogsServiceRequest with one ResourceLogs per
// distinct (node, source, namespace, pod, container):
//
//   - resource attributes: k8s.node.name, host.name and node (all the node
//     name), and for pod records k8s.namespace.name, k8s.pod.name,
//     k8s.container.name;
//   - one scope, ScopeName;
//   - each LogRecord: Timestamp (the record's time; unset when zero),
//     ObservedTimestamp (when the batch was encoded), the body as a string, and
//     the attributes log.source and source (kernel|pod); kernel records also
//     kmsg.seq, boot.id, kmsg.facility, kmsg.level and a severity (see
//     KernelSeverity); NVML event records a severity from their level; pod
//     records log.iostream and no severity.
//
// Strings that are not valid UTF-8 (kernel messages may hold raw bytes) have
// the invalid bytes replaced by U+FFFD: protobuf strings must be UTF-8, and a
// receiver would otherwise refuse the whole batch.
func NewOTLP(endpoint string, opts OTLPOptions) Sender {
	u := strings.TrimRight(strings.TrimSpace(endpoint), "/")
	if !strings.HasSuffix(u, "/v1/logs") {
		u += "/v1/logs"
	}
	p := newPoster("otlp", u, opts.Client, opts.Timeout, "application/x-protobuf")
	for k, v := range opts.Headers {
		p.headers.Set(k, v)
	}
	return &OTLP{p: p, gzip: opts.Gzip, now: time.Now}
}

// Name returns "otlp <url>".
func (o *OTLP) Name() string { return "otlp " + o.p.redacted }

// Send posts recs as one request. An empty batch sends nothing.
func (o *OTLP) Send(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return ctx.Err()
	}
	body, err := encodeOTLP(recs, o.now(), o.gzip)
	if err != nil {
		return err
	}
	var extra http.Header
	if o.gzip {
		extra = http.Header{"Content-Encoding": {"gzip"}}
	}
	resp, ctype, err := o.p.post(ctx, body, extra, 64<<10)
	if err != nil {
		return err
	}
	return partialSuccess(resp, ctype)
}

// partialSuccess decodes an ExportLogsServiceResponse and reports rejected
// records. A body that does not decode is ignored: the 2xx status acknowledged
// the request.
func partialSuccess(body []byte, ctype string) error {
	if len(body) == 0 {
		return nil
	}
	r := plogotlp.NewExportResponse()
	var err error
	if strings.Contains(ctype, "json") {
		err = r.UnmarshalJSON(body)
	} else {
		err = r.UnmarshalProto(body)
	}
	if err != nil {
		return nil
	}
	if n := r.PartialSuccess().RejectedLogRecords(); n > 0 {
		return &PartialSuccessError{Rejected: n, Message: r.PartialSuccess().ErrorMessage()}
	}
	return nil
}

// Severity is an OTLP severity number and text.
type Severity struct {
	Number plog.SeverityNumber
	Text   string
}

// kernelSeverity maps the syslog levels to OTLP severities, keeping the order
// of the syslog levels inside each OTLP range: the number tells emerg, alert,
// crit and err apart (FATAL, ERROR3, ERROR2, ERROR), and notice from info
// (INFO2, INFO); the text is the range's name, the one log UIs and Loki's
// detected_level understand. The raw level travels in kmsg.level too.
var kernelSeverity = [8]Severity{
	{plog.SeverityNumberFatal, "FATAL"},  // 0 emerg: system is unusable
	{plog.SeverityNumberError3, "ERROR"}, // 1 alert: action must be taken immediately
	{plog.SeverityNumberError2, "ERROR"}, // 2 crit
	{plog.SeverityNumberError, "ERROR"},  // 3 err
	{plog.SeverityNumberWarn, "WARN"},    // 4 warning
	{plog.SeverityNumberInfo2, "INFO"},   // 5 notice: normal but significant
	{plog.SeverityNumberInfo, "INFO"},    // 6 info
	{plog.SeverityNumberDebug, "DEBUG"},  // 7 debug
}

// KernelSeverity maps a syslog level (0 emerg .. 7 debug) to an OTLP severity:
//
//	0 emerg   FATAL  (21)    4 warning WARN  (13)
//	1 alert   ERROR3 (19)    5 notice  INFO2 (10)
//	2 crit    ERROR2 (18)    6 info    INFO  (9)
//	3 err     ERROR  (17)    7 debug   DEBUG (5)
//
// with the texts FATAL, ERROR, WARN, INFO and DEBUG. Levels outside 0-7 map to
// SeverityNumberUnspecified with no text.
func KernelSeverity(level int) Severity {
	if level < 0 || level >= len(kernelSeverity) {
		return Severity{Number: plog.SeverityNumberUnspecified}
	}
	return kernelSeverity[level]
}

// resourceKey identifies the ResourceLogs a record belongs to.
type resourceKey struct {
	node, source, namespace, pod, container string
}

// buildLogs turns records into plog.Logs, one ResourceLogs per resourceKey in
// order of first appearance, records in input order.
func buildLogs(recs []Record, observed time.Time) plog.Logs {
	ld := plog.NewLogs()
	groups := make(map[resourceKey]plog.LogRecordSlice, 4)
	obs := pcommon.NewTimestampFromTime(observed)
	for i := range recs {
		r := &recs[i]
		key := resourceKey{r.Node, r.Source, r.Namespace, r.Pod, r.Container}
		lrs, ok := groups[key]
		if !ok {
			rl := ld.ResourceLogs().AppendEmpty()
			ra := rl.Resource().Attributes()
			ra.EnsureCapacity(6)
			if r.Node != "" {
				node := validUTF8(r.Node)
				ra.PutStr(AttrK8sNodeName, node)
				ra.PutStr(AttrHostName, node)
				ra.PutStr(AttrNode, node)
			}
			if r.Namespace != "" {
				ra.PutStr(AttrK8sNamespaceName, validUTF8(r.Namespace))
			}
			if r.Pod != "" {
				ra.PutStr(AttrK8sPodName, validUTF8(r.Pod))
			}
			if r.Container != "" {
				ra.PutStr(AttrK8sContainerName, validUTF8(r.Container))
			}
			// source is a resource attribute (records are grouped by it), so a Loki
			// that promotes it gives {node="n1", source="kernel"} streams on the OTLP
			// path as on the direct-push path.
			if r.Source != "" {
				ra.PutStr(AttrSource, validUTF8(r.Source))
			}
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(ScopeName)
			lrs = sl.LogRecords()
			groups[key] = lrs
		}
		lr := lrs.AppendEmpty()
		if !r.Time.IsZero() {
			lr.SetTimestamp(pcommon.NewTimestampFromTime(r.Time))
		}
		lr.SetObservedTimestamp(obs)
		lr.Body().SetStr(validUTF8(r.Body))
		a := lr.Attributes()
		src := validUTF8(r.Source)
		switch r.Source {
		case SourceKernel:
			a.EnsureCapacity(6)
			a.PutStr(AttrLogSource, src)
			a.PutInt(AttrKmsgSeq, int64(r.Seq))
			if r.BootID != "" {
				a.PutStr(AttrBootID, validUTF8(r.BootID))
			}
			a.PutInt(AttrKmsgFacility, int64(r.Facility))
			a.PutInt(AttrKmsgLevel, int64(r.Level))
			sev := KernelSeverity(r.Level)
			lr.SetSeverityNumber(sev.Number)
			lr.SetSeverityText(sev.Text)
		case SourceNVML, SourceProbe:
			a.PutStr(AttrLogSource, src)
			sev := KernelSeverity(r.Level)
			lr.SetSeverityNumber(sev.Number)
			lr.SetSeverityText(sev.Text)
		default:
			a.EnsureCapacity(3)
			if src != "" {
				a.PutStr(AttrLogSource, src)
			}
			if r.Stream != "" {
				a.PutStr(AttrLogIOStream, validUTF8(r.Stream))
			}
		}
	}
	return ld
}

var gzipPool = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// encodeOTLP returns the request body for recs: the protobuf
// ExportLogsServiceRequest, gzipped when gz.
func encodeOTLP(recs []Record, observed time.Time, gz bool) ([]byte, error) {
	raw, err := plogotlp.NewExportRequestFromLogs(buildLogs(recs, observed)).MarshalProto()
	if err != nil {
		return nil, fmt.Errorf("otlp: marshal: %w", err)
	}
	if !gz {
		return raw, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(raw)/4 + 64)
	w := gzipPool.Get().(*gzip.Writer)
	defer gzipPool.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(raw); err != nil {
		return nil, fmt.Errorf("otlp: gzip: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("otlp: gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// validUTF8 replaces invalid UTF-8 bytes with U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

package ship

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"

	"github.com/faultline-dev/faultline/logstream"
)

// Loki stream labels.
const (
	LabelNode      = logstream.LabelNode
	LabelSource    = logstream.LabelSource
	LabelNamespace = logstream.LabelNamespace
	LabelPod       = logstream.LabelPod
	LabelContainer = logstream.LabelContainer
)

// Loki structured metadata of an entry.
const (
	MetaSeq      = logstream.MetaSeq
	MetaBootID   = logstream.MetaBootID
	MetaLevel    = logstream.MetaLevel
	MetaFacility = logstream.MetaFacility
	MetaStream   = logstream.MetaStream
)

// LokiOptions configures the Loki push sender.
type LokiOptions struct {
	// Tenant, when set, is sent as X-Scope-OrgID (multi-tenant Loki).
	Tenant string
	// Username and Password, when Username is set, are sent as basic auth.
	Username, Password string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>" (it
	// takes precedence over basic auth).
	BearerToken string
	// Headers are added to every request.
	Headers map[string]string
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Client sends the requests (default: a client on http.DefaultTransport).
	Client *http.Client
}

// Loki pushes to Loki's native push API: POST <baseURL>/loki/api/v1/push, a
// snappy-compressed (block format) protobuf PushRequest.
type Loki struct {
	p   *poster
	now func() time.Time
}

// NewLoki returns a sender that pushes to baseURL+"/loki/api/v1/push" (a
// baseURL already ending in /loki/api/v1/push is used as is), e.g.
// http://loki:3100.
//
// Each batch becomes one PushRequest with one stream per distinct label set:
// node and source (kernel|pod|nvml) for every record, plus namespace, pod and
// container for pod records (labels with an empty value are left out). Entries
// keep the records' order within a stream, sorted by time (stably, so kernel
// records with equal timestamps stay in sequence order). Each entry carries
// structured metadata: seq, boot_id, level and facility for kernel records,
// stream for pod records, level for NVML event records. A zero record time is replaced by the send time.
func NewLoki(baseURL string, opts LokiOptions) Sender {
	u := strings.TrimRight(strings.TrimSpace(baseURL), "/")
	if !strings.HasSuffix(u, "/loki/api/v1/push") {
		u += "/loki/api/v1/push"
	}
	p := newPoster("loki", u, opts.Client, opts.Timeout, "application/x-protobuf")
	for k, v := range opts.Headers {
		p.headers.Set(k, v)
	}
	if opts.Tenant != "" {
		p.headers.Set("X-Scope-OrgID", opts.Tenant)
	}
	switch {
	case opts.BearerToken != "":
		p.headers.Set("Authorization", "Bearer "+opts.BearerToken)
	case opts.Username != "":
		p.headers.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(opts.Username+":"+opts.Password)))
	}
	return &Loki{p: p, now: time.Now}
}

// Name returns "loki <url>".
func (l *Loki) Name() string { return "loki " + l.p.redacted }

// Send pushes recs as one request. An empty batch sends nothing.
func (l *Loki) Send(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return ctx.Err()
	}
	body, err := encodeLoki(recs, l.now())
	if err != nil {
		return err
	}
	_, _, err = l.p.post(ctx, body, nil, 0)
	return err
}

// levelNames are the syslog level names as dmesg prints them.
var levelNames = [8]string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

// LevelName returns the name of a syslog level (0 "emerg" .. 7 "debug"), or its
// number for other values.
func LevelName(level int) string {
	if level >= 0 && level < len(levelNames) {
		return levelNames[level]
	}
	return strconv.Itoa(level)
}

// LokiLabels returns the stream selector of a record in Loki's push format,
// label names sorted: {container="c", namespace="ns", node="n1", pod="p", source="pod"}.
// Values are quoted like Go strings (strconv.Quote), which is what Prometheus
// and LogQL label syntax accept; invalid UTF-8 becomes U+FFFD.
func LokiLabels(r *Record) string {
	var b strings.Builder
	b.Grow(64 + len(r.Node) + len(r.Namespace) + len(r.Pod) + len(r.Container))
	b.WriteByte('{')
	first := true
	add := func(name, value string) {
		if value == "" {
			return
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(validUTF8(value)))
	}
	// Alphabetical order.
	add(LabelContainer, r.Container)
	add(LabelNamespace, r.Namespace)
	add(LabelNode, r.Node)
	add(LabelPod, r.Pod)
	add(LabelSource, r.Source)
	b.WriteByte('}')
	return b.String()
}

// buildPush groups records into streams, in order of first appearance.
func buildPush(recs []Record, now time.Time) *push.PushRequest {
	req := &push.PushRequest{}
	index := make(map[resourceKey]int, 4)
	for i := range recs {
		r := &recs[i]
		key := resourceKey{r.Node, r.Source, r.Namespace, r.Pod, r.Container}
		si, ok := index[key]
		if !ok {
			si = len(req.Streams)
			index[key] = si
			req.Streams = append(req.Streams, push.Stream{Labels: LokiLabels(r)})
		}
		ts := r.Time
		if ts.IsZero() {
			ts = now
		}
		e := push.Entry{Timestamp: ts, Line: validUTF8(r.Body)}
		switch r.Source {
		case SourceKernel:
			e.StructuredMetadata = push.LabelsAdapter{
				{Name: MetaSeq, Value: strconv.FormatUint(r.Seq, 10)},
				{Name: MetaLevel, Value: LevelName(r.Level)},
				{Name: MetaFacility, Value: strconv.Itoa(r.Facility)},
			}
			if r.BootID != "" {
				e.StructuredMetadata = append(e.StructuredMetadata, push.LabelAdapter{Name: MetaBootID, Value: validUTF8(r.BootID)})
			}
		case SourceNVML, SourceProbe:
			e.StructuredMetadata = push.LabelsAdapter{{Name: MetaLevel, Value: LevelName(r.Level)}}
		default:
			if r.Stream != "" {
				e.StructuredMetadata = push.LabelsAdapter{{Name: MetaStream, Value: validUTF8(r.Stream)}}
			}
		}
		req.Streams[si].Entries = append(req.Streams[si].Entries, e)
	}
	for i := range req.Streams {
		slices.SortStableFunc(req.Streams[i].Entries, func(a, b push.Entry) int {
			return a.Timestamp.Compare(b.Timestamp)
		})
	}
	return req
}

// encodeLoki returns the request body for recs: the snappy-compressed PushRequest.
func encodeLoki(recs []Record, now time.Time) ([]byte, error) {
	raw, err := buildPush(recs, now).Marshal()
	if err != nil {
		return nil, fmt.Errorf("loki: marshal: %w", err)
	}
	return snappy.Encode(nil, raw), nil
}

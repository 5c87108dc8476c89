package lokisource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/faultline-dev/faultline/logstream"
)

// Loki's HTTP API, as used here:
//
//	POST /loki/api/v1/query_range  query=&start=&end=&limit=&direction=forward (form)
//	GET /loki/api/v1/tail?query=&start=&limit=&delay_for=   (websocket)
//
// Both answer streams of {"stream": {labels}, "values": [["<ns>", "<line>", {meta}]]};
// the tail adds "dropped_entries": [{"timestamp": "<ns>", "labels": {...}}]. The
// header X-Loki-Response-Encoding-Flags: categorize-labels makes both return the
// index labels as the stream and structured metadata per entry, so an entry's stream
// is the same whichever way it was read (the key deduplication relies on).
const (
	queryRangePath = "/loki/api/v1/query_range"
	tailPath       = "/loki/api/v1/tail"
	encodingHeader = "X-Loki-Response-Encoding-Flags"
	categorize     = "categorize-labels"
)

// statusError is an HTTP error answer from Loki.
type statusError struct {
	op     string
	code   int
	status string
	body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("loki %s: %s: %s", e.op, e.status, strings.TrimSpace(e.body))
}

// errTooLarge marks an answer over Config.MaxResponseBytes.
var errTooLarge = errors.New("response size limit exceeded")

// isQueryTooLong reports whether Loki refused a range longer than its
// max_query_length.
func isQueryTooLong(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.permanent() && strings.Contains(se.body, "query time range exceeds the limit")
}

// entriesLimit is the page size Loki allows when err is its refusal of a page of
// limit lines as over its max_entries_limit_per_query ("max entries limit per
// query exceeded, limit > max_entries_limit_per_query (N > M)"): M, or half of
// limit when the message does not say; 0 when err is not that refusal.
func entriesLimit(err error, limit int) int {
	var se *statusError
	if !errors.As(err, &se) || se.code != http.StatusBadRequest || limit <= 1 ||
		!strings.Contains(se.body, "max entries limit per query exceeded") {
		return 0
	}
	if m := entriesLimitRe.FindStringSubmatch(se.body); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 && n < limit {
			return n
		}
	}
	return max(1, limit/2)
}

var entriesLimitRe = regexp.MustCompile(`\(\d+ > (\d+)\)`)

// permanent reports whether retrying cannot help: the query itself is wrong.
func (e *statusError) permanent() bool { return e.code == http.StatusBadRequest }

// isPermanent reports whether err says the request can never succeed: a 400, or a
// tail Loki closed because its querier answered 400 (the websocket was already
// open, so Loki reports it in the close frame).
func isPermanent(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.permanent()
	}
	var ce *websocket.CloseError
	return errors.As(err, &ce) && ce.Code == websocket.CloseInternalServerErr && strings.Contains(ce.Text, "Code(400)")
}

// tlsConfig builds the client TLS settings.
func (c *TLSConfig) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: c.InsecureSkipVerify, ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca: no certificate in %s", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" || c.KeyFile != "" {
		if c.CertFile == "" || c.KeyFile == "" {
			return nil, errors.New("tls: client certificate needs both cert and key files")
		}
		// Read the pair at each handshake so a rotated certificate is picked up.
		certFile, keyFile := c.CertFile, c.KeyFile
		if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, err
			}
			return &cert, nil
		}
	}
	return cfg, nil
}

// header returns the headers of every request: tenant, authorization, encoding flags.
func (s *Source) header() (http.Header, error) {
	h := http.Header{}
	h.Set(encodingHeader, categorize)
	h.Set("User-Agent", "faultline-controller")
	if s.cfg.Tenant != "" {
		h.Set("X-Scope-OrgID", s.cfg.Tenant)
	}
	switch {
	case s.cfg.BearerTokenFile != "":
		// Re-read each time: projected service account tokens rotate.
		b, err := os.ReadFile(s.cfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("bearer token: %w", err)
		}
		h.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	case s.cfg.BearerToken != "":
		h.Set("Authorization", "Bearer "+s.cfg.BearerToken)
	case s.cfg.Username != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s.cfg.Username+":"+s.cfg.Password)))
	}
	return h, nil
}

// entry is one log entry as read from Loki.
type entry struct {
	stream string            // canonical index label set
	labels map[string]string // index labels
	meta   map[string]string // structured metadata
	ts     int64
	line   string
}

// metaNode is the entry's node where it is structured metadata, not a stream
// label: "" when the stream names it (or nothing does).
func (e entry) metaNode(label string) string {
	if _, ok := e.labels[label]; ok {
		return ""
	}
	return e.meta[label]
}

type wireStream struct {
	Stream map[string]string `json:"stream"`
	Values []wireValue       `json:"values"`
}

// wireValue is ["<ns>", "<line>"] or ["<ns>", "<line>", {"structuredMetadata": {...}, "parsed": {...}}].
type wireValue struct {
	ts   int64
	line string
	meta map[string]string
}

func (v *wireValue) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	if len(parts) < 2 {
		return fmt.Errorf("log value has %d fields", len(parts))
	}
	var ts string
	if err := json.Unmarshal(parts[0], &ts); err != nil {
		return fmt.Errorf("log timestamp: %w", err)
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("log timestamp: %w", err)
	}
	v.ts = n
	if err := json.Unmarshal(parts[1], &v.line); err != nil {
		return fmt.Errorf("log line: %w", err)
	}
	if len(parts) > 2 {
		var m struct {
			StructuredMetadata map[string]string `json:"structuredMetadata"`
		}
		if err := json.Unmarshal(parts[2], &m); err == nil {
			v.meta = m.StructuredMetadata
		}
	}
	return nil
}

type wireDropped struct {
	Timestamp string            `json:"timestamp"`
	Labels    map[string]string `json:"labels"`
}

type tailMessage struct {
	Streams []wireStream  `json:"streams"`
	Dropped []wireDropped `json:"dropped_entries"`
}

// flatten turns streams into entries, in stream order.
func flatten(streams []wireStream) []entry {
	var out []entry
	for _, st := range streams {
		name := logstream.CanonicalLabels(st.Stream)
		for _, v := range st.Values {
			out = append(out, entry{stream: name, labels: st.Stream, meta: v.meta, ts: v.ts, line: v.line})
		}
	}
	return out
}

// queryAnswer is query_range's answer, its result of type T.
type queryAnswer[T any] struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     T      `json:"result"`
	} `json:"data"`
}

// queryRange reads one page, forward from start (inclusive) to end (exclusive).
func (s *Source) queryRange(ctx context.Context, query string, start, end int64, limit int) ([]entry, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	resp, err := s.postQueryRange(ctx, query, start, end, limit, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r queryAnswer[[]wireStream]
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, s.cfg.MaxResponseBytes)).Decode(&r); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, fmt.Errorf("loki query_range: %w (%d bytes)", errTooLarge, mb.Limit)
		}
		return nil, fmt.Errorf("loki query_range: decode: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("loki query_range: status %q", r.Status)
	}
	if r.Data.ResultType != "streams" {
		return nil, &statusError{op: "query_range", code: http.StatusBadRequest, status: "not a log query",
			body: fmt.Sprintf("result type %q (a metric query?)", r.Data.ResultType)}
	}
	es := flatten(r.Data.Result)
	// Forward order across streams; ties in a fixed order.
	slices.SortStableFunc(es, func(a, b entry) int {
		switch {
		case a.ts != b.ts:
			if a.ts < b.ts {
				return -1
			}
			return 1
		case a.stream != b.stream:
			return strings.Compare(a.stream, b.stream)
		}
		return strings.Compare(a.line, b.line)
	})
	return es, nil
}

// countBuckets counts the entries of the log query query in n buckets of step
// (whole milliseconds) after start (Unix ns): bucket i holds the entries with a
// timestamp in (start+i*step, start+(i+1)*step], as Loki's count_over_time counts
// them at the bucket's end. Loki sends a number per bucket, not the lines; it still
// runs the query's filter over them, so a count costs it about what a read does.
func (s *Source) countBuckets(ctx context.Context, query string, start int64, step time.Duration, n int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	stepMs := step.Milliseconds()
	metric := fmt.Sprintf("sum(count_over_time(%s [%dms]))", query, stepMs)
	first, last := start+int64(step), start+int64(n)*int64(step)
	resp, err := s.postQuery(ctx, url.Values{
		"query": {metric},
		"start": {strconv.FormatInt(first, 10)},
		"end":   {strconv.FormatInt(last, 10)},
		"step":  {strconv.FormatInt(stepMs, 10) + "ms"},
	}, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// A matrix: series of [<seconds, a JSON number>, "<count>"].
	var r queryAnswer[[]struct {
		Values [][2]json.RawMessage `json:"values"`
	}]
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, s.cfg.MaxResponseBytes)).Decode(&r); err != nil {
		return nil, fmt.Errorf("loki count: decode: %w", err)
	}
	if r.Status != "success" || r.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("loki count: status %q, result type %q", r.Status, r.Data.ResultType)
	}
	counts := make([]int64, n)
	startMs := start / int64(time.Millisecond)
	for _, series := range r.Data.Result {
		for _, v := range series.Values {
			// Milliseconds are exact in the seconds.
			at, err := strconv.ParseFloat(string(v[0]), 64)
			if err != nil {
				return nil, fmt.Errorf("loki count: timestamp %s: %w", v[0], err)
			}
			var c string
			if err := json.Unmarshal(v[1], &c); err != nil {
				return nil, fmt.Errorf("loki count: value %s: %w", v[1], err)
			}
			cnt, err := strconv.ParseFloat(c, 64)
			if err != nil {
				return nil, fmt.Errorf("loki count: value %q: %w", c, err)
			}
			i := int((int64(math.Round(at*1000))-startMs)/stepMs) - 1
			if i >= 0 && i < n {
				counts[i] += int64(cnt)
			}
		}
	}
	return counts, nil
}

// checkQuery asks Loki whether it accepts query, without the encoding flags: with
// them, Loki answers a query it cannot parse with an empty success.
func (s *Source) checkQuery(ctx context.Context, query string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	now := time.Now().UnixNano()
	resp, err := s.postQueryRange(ctx, query, now-int64(time.Second), now, 1, false)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// postQueryRange sends a query_range request and returns the response of a 200;
// any other status is a statusError.
func (s *Source) postQueryRange(ctx context.Context, query string, start, end int64, limit int, categorized bool) (*http.Response, error) {
	return s.postQuery(ctx, url.Values{
		"query":     {query},
		"start":     {strconv.FormatInt(start, 10)},
		"end":       {strconv.FormatInt(end, 10)},
		"limit":     {strconv.Itoa(limit)},
		"direction": {"forward"},
	}, categorized)
}

// postQuery sends a query_range request with form and returns the response of a
// 200; any other status is a statusError.
func (s *Source) postQuery(ctx context.Context, form url.Values, categorized bool) (*http.Response, error) {
	// POST with a form body: the line filter of many rule packs is kilobytes long,
	// more than some proxies accept in a URL.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base.JoinPath(queryRangePath).String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	h, err := s.header()
	if err != nil {
		return nil, err
	}
	if !categorized {
		h.Del(encodingHeader)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, &statusError{op: "query_range", code: resp.StatusCode, status: resp.Status, body: string(body)}
	}
	return resp, nil
}

// tailURL is the websocket address of the tail endpoint.
func (s *Source) tailURL(query string, start int64, limit int) string {
	u := s.base.JoinPath(tailPath)
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	u.RawQuery = url.Values{
		"query":     {query},
		"start":     {strconv.FormatInt(start, 10)},
		"limit":     {strconv.Itoa(limit)},
		"delay_for": {strconv.Itoa(int(s.cfg.DelayFor / time.Second))},
	}.Encode()
	return u.String()
}

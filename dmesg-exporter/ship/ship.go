// Package ship sends batches of log records to a receiver and retries failed
// sends.
//
// Two senders exist: NewOTLP posts OTLP/HTTP protobuf logs (built with the
// collector's pdata) to an OpenTelemetry Collector, and NewLoki pushes straight
// to Grafana Loki's native push API (protobuf, snappy). A Sender makes exactly
// one attempt per Send; Retry wraps it with exponential backoff and full jitter.
//
// Every Send error tells whether another attempt may succeed (Retryable):
// transport failures, timeouts of one attempt, 429 and 5xx responses may; other
// 4xx responses, encoding failures and the caller's context ending may not. HTTP
// failures are *HTTPError values carrying the status and the start of the
// response body.
package ship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/logstream"
)

// Sources of a Record.
const (
	SourceKernel = logstream.SourceKernel
	SourcePod    = logstream.SourcePod
	SourceNVML   = logstream.SourceNVML
	SourceProbe  = logstream.SourceProbe
)

// Record is one log line to ship.
type Record struct {
	Time   time.Time
	Body   string
	Source string // SourceKernel, SourcePod, SourceNVML or SourceProbe
	Node   string

	// Kernel records; NVML event and probe verdict records carry a Level too.
	Seq      uint64
	BootID   string
	Level    int // syslog level, 0 (emerg) to 7 (debug)
	Facility int

	// Pod records.
	Namespace, Pod, Container string
	Stream                    string // stdout or stderr
}

// Sender ships batches of records.
type Sender interface {
	// Send ships one batch, one attempt. It returns nil only when the receiver
	// acknowledged it (2xx). Errors say whether a retry may succeed (see Retryable).
	Send(ctx context.Context, recs []Record) error
	// Name identifies the sender and its target in logs ("otlp http://...").
	Name() string
}

// HTTPError is a response outside 2xx.
type HTTPError struct {
	Sender     string // "otlp" or "loki"
	URL        string // the URL posted to, without credentials
	StatusCode int
	Status     string // e.g. "429 Too Many Requests"
	// Body is the start of the response body (at most maxErrorBody bytes), for
	// logs: Loki and the collector say there why they refused a batch.
	Body string
	// RetryAfter is the delay a 429 or 503 response asked for in its Retry-After
	// header (zero when absent). Retry waits at least this long, up to Backoff.Max.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s: POST %s: %s", e.Sender, e.URL, e.Status)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Temporary reports whether a later attempt may succeed: 429 and 5xx.
func (e *HTTPError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// NetError is a failed attempt that got no HTTP response: connection refused or
// reset, DNS failure, the per-attempt timeout. Always retryable.
type NetError struct {
	Sender string
	URL    string
	Err    error
}

func (e *NetError) Error() string { return fmt.Sprintf("%s: POST %s: %v", e.Sender, e.URL, e.Err) }
func (e *NetError) Unwrap() error { return e.Err }

// PartialSuccessError reports an OTLP response that accepted the request but
// rejected some of its records (the OTLP partial_success field). The rejected
// records cannot be sent again successfully, so it is not retryable.
type PartialSuccessError struct {
	Rejected int64
	Message  string
}

func (e *PartialSuccessError) Error() string {
	return fmt.Sprintf("otlp: receiver rejected %d of the batch's log records: %s", e.Rejected, e.Message)
}

// Retryable reports whether sending again may succeed after err: network
// errors, per-attempt timeouts, 429 and 5xx responses are retryable; other 4xx
// responses, partial successes, encoding errors, and the end of the caller's
// context (context.Canceled, context.DeadlineExceeded) are not.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Temporary()
	}
	var ne *NetError
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// Errors from other Sender implementations: plain transport errors.
	var nerr net.Error
	if errors.As(err, &nerr) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// maxErrorBody bounds the response body kept in an HTTPError.
const maxErrorBody = 1024

// defaultTimeout bounds one attempt when the options set no timeout.
const defaultTimeout = 10 * time.Second

// poster holds what both senders share: the target, the client, the headers.
type poster struct {
	sender      string
	url         string // full URL posted to
	redacted    string // url without credentials, for errors and Name
	client      *http.Client
	timeout     time.Duration
	contentType string
	headers     http.Header
}

func newPoster(sender, rawURL string, client *http.Client, timeout time.Duration, contentType string) *poster {
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport}
	}
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	red := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		red = u.Redacted()
	}
	return &poster{sender: sender, url: rawURL, redacted: red, client: client, timeout: timeout,
		contentType: contentType, headers: http.Header{}}
}

// post makes one POST and classifies the outcome. It returns the response body
// of a 2xx response (at most limit bytes) and the response's Content-Type.
func (p *poster) post(ctx context.Context, body []byte, extra http.Header, limit int64) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", p.sender, err)
	}
	actx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", p.sender, err)
	}
	req.Header.Set("Content-Type", p.contentType)
	for k, vs := range p.headers {
		req.Header[k] = vs
	}
	for k, vs := range extra {
		req.Header[k] = vs
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// The caller's context ended: not retryable. Anything else, including
		// this attempt's own timeout, is a transport failure: retryable.
		if cerr := ctx.Err(); cerr != nil {
			return nil, "", fmt.Errorf("%s: POST %s: %w", p.sender, p.redacted, cerr)
		}
		return nil, "", &NetError{Sender: p.sender, URL: p.redacted, Err: stripURLError(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
		if err != nil {
			// Acknowledged already: the status is what counts.
			b = nil
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
		return b, resp.Header.Get("Content-Type"), nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	he := &HTTPError{Sender: p.sender, URL: p.redacted, StatusCode: resp.StatusCode, Status: resp.Status,
		Body: snippet(b)}
	if he.Status == "" {
		he.Status = strconv.Itoa(resp.StatusCode)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		he.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return nil, "", he
}

// stripURLError drops the *url.Error wrapper, whose message repeats method and URL.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// snippet makes a response body fit for a log line: valid UTF-8, trimmed.
func snippet(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if len(b) >= maxErrorBody {
		s += "…"
	}
	return s
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(24*time.Hour/time.Second) {
			n = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// recordOverhead approximates what a record costs beyond its strings in an
// encoded request (timestamps, attribute names, framing).
const recordOverhead = 128

// Size is the record's approximate encoded size in bytes, before compression.
// Batches and buffers are bounded by it.
func (r *Record) Size() int {
	return len(r.Body) + len(r.Node) + len(r.Source) + len(r.BootID) + len(r.Namespace) + len(r.Pod) +
		len(r.Container) + len(r.Stream) + recordOverhead
}

// bodyTooLarge is the error text of Go's http.MaxBytesReader, which the
// OpenTelemetry Collector's OTLP/HTTP receiver answers with a 400, not a 413, when a
// body exceeds its max_request_body_size.
const bodyTooLarge = "request body too large"

// TooLarge reports whether err is the receiver refusing a request for its size:
// a 413 (Content Too Large), or a 400 that says the body was too large (the
// collector's answer): the same records in smaller requests may pass.
func TooLarge(err error) bool {
	var he *HTTPError
	if !errors.As(err, &he) {
		return false
	}
	return he.StatusCode == http.StatusRequestEntityTooLarge ||
		he.StatusCode == http.StatusBadRequest && strings.Contains(he.Body, bodyTooLarge)
}

// StatusCode is the HTTP status of a refused request, or 0 when err is not an
// HTTP response.
func StatusCode(err error) int {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.StatusCode
	}
	return 0
}

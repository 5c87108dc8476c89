// Package intake receives the log lines the OpenTelemetry Collector pushes to the
// controller (OTLP/HTTP logs, POST /v1/logs) as it writes them to Loki, so the leader
// decides a line within milliseconds of the collector receiving it instead of after
// Loki's tail or poll delivers it. Loki stays the record: the controller still reads
// it (catch-up after a restart, lines this path lost), and skips the lines it already
// had from here.
//
// Every request is authenticated and authorized with Kubernetes identities (a bearer
// token of the intake's audience, TokenReview, then a SubjectAccessReview for
// `create loglines.faultline.io`), over TLS only (the listener is the caller's), and
// bounded: the body before and after decompression, the records per request. A
// record that cannot be a line (no node, no text, a source the controller does not
// read) is counted and skipped; nothing is dropped silently. Only the leader decides:
// the others answer 503 with Retry-After, which the collector's exporter retries.
package intake

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/logstream"
)

// Path is where the collector's otlphttp exporter posts logs (its endpoint plus
// /v1/logs).
const Path = "/v1/logs"

// DefaultAudience is the audience the pushing collector's token must carry.
const DefaultAudience = "faultline-intake"

// Action is what a caller must be allowed to do to push lines.
var Action = kubeauth.Action{Verb: "create", Resource: "loglines"}

// Limits of one request.
const (
	// DefaultMaxBodyBytes bounds the body as sent (compressed or not): a collector
	// batch of 8,192 kernel lines is about 1.5 MiB uncompressed.
	DefaultMaxBodyBytes = 8 << 20
	// DefaultMaxDecodedBytes bounds the body after decompression.
	DefaultMaxDecodedBytes = 32 << 20
	// DefaultMaxRecords bounds the records of one request.
	DefaultMaxRecords = 100000
	// MaxHeaderBytes bounds a request's line and headers.
	MaxHeaderBytes = 64 << 10
)

// ErrNotLeading is what Deliver returns on a replica that does not lead: the
// request is answered 503, and the collector retries (reaching the leader).
var ErrNotLeading = errors.New("this replica does not lead")

// notLeadingRetry is the Retry-After of a 503 from a follower: a leader is elected
// within seconds.
const notLeadingRetry = time.Second

// Config configures a Server.
type Config struct {
	// Auth authorizes each request's bearer token for Action (the Reviewer checks
	// the token's audience).
	Auth kubeauth.Authorizer
	// Lines converts records to lines (the node attribute, the sources read).
	Lines Converter
	// Deliver decides the lines of one request, in order; ErrNotLeading answers 503.
	Deliver func(ctx context.Context, lines []logstream.Line) error
	// MaxBodyBytes, MaxDecodedBytes, MaxRecords: 0 means the default.
	MaxBodyBytes, MaxDecodedBytes int64
	MaxRecords                    int
	Metrics                       *Metrics
	Log                           *slog.Logger
}

// Server serves POST /v1/logs.
type Server struct {
	cfg Config
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Auth == nil || cfg.Deliver == nil || cfg.Metrics == nil {
		return nil, errors.New("intake: Auth, Deliver and Metrics are required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxDecodedBytes <= 0 {
		cfg.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = DefaultMaxRecords
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Server{cfg: cfg}, nil
}

// Handler serves Path; every other path is 404.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Path, s.serve)
	return mux
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	code := s.handle(w, r)
	s.cfg.Metrics.Requests.WithLabelValues(strconv.Itoa(code)).Inc()
}

// handle answers one request and returns its status code.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(w, http.StatusMethodNotAllowed, "only POST")
	}
	user, err := s.cfg.Auth.Authorize(r.Context(), kubeauth.BearerToken(r), Action)
	switch {
	case errors.Is(err, kubeauth.ErrUnauthenticated):
		return fail(w, http.StatusUnauthorized, err.Error())
	case errors.Is(err, kubeauth.ErrForbidden):
		s.cfg.Log.Warn("intake: push refused", "user", user, "err", err)
		return fail(w, http.StatusForbidden, err.Error())
	case errors.Is(err, kubeauth.ErrRateLimited):
		return retryLater(w, http.StatusTooManyRequests, kubeauth.RetryAfter(err), err.Error())
	case err != nil:
		// The apiserver could not answer the reviews: the caller may retry.
		return retryLater(w, http.StatusServiceUnavailable, time.Second, "cannot review the token: "+err.Error())
	}
	json, err := isJSON(r.Header.Get("Content-Type"))
	if err != nil {
		return fail(w, http.StatusUnsupportedMediaType, err.Error())
	}
	body, code, err := s.readBody(w, r)
	if err != nil {
		return fail(w, code, err.Error())
	}
	req := plogotlp.NewExportRequest()
	if json {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		s.cfg.Metrics.Malformed.WithLabelValues("body").Inc()
		return fail(w, http.StatusBadRequest, fmt.Sprintf("not an OTLP logs request: %v", err))
	}
	ld := req.Logs()
	if n := ld.LogRecordCount(); n > s.cfg.MaxRecords {
		return fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d records, at most %d a request", n, s.cfg.MaxRecords))
	}
	lines, skipped := s.cfg.Lines.Lines(ld)
	s.cfg.Metrics.count(lines, skipped)
	if len(lines) > 0 {
		if err := s.cfg.Deliver(r.Context(), lines); err != nil {
			if errors.Is(err, ErrNotLeading) {
				// A new connection may reach the leader behind the same Service.
				w.Header().Set("Connection", "close")
				return retryLater(w, http.StatusServiceUnavailable, notLeadingRetry, err.Error())
			}
			s.cfg.Log.Warn("intake: lines not decided", "lines", len(lines), "err", err)
			return retryLater(w, http.StatusServiceUnavailable, time.Second, "lines not decided: "+err.Error())
		}
	}
	return respond(w, json)
}

// readBody reads the body within the limits, decompressing gzip.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body of %d bytes, at most %d", r.ContentLength, s.cfg.MaxBodyBytes)
	}
	var in io.Reader = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, bodyCode(err), fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		in = zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content encoding %q: only gzip", enc)
	}
	body, err := io.ReadAll(io.LimitReader(in, s.cfg.MaxDecodedBytes+1))
	if err != nil {
		return nil, bodyCode(err), fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > s.cfg.MaxDecodedBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes decompressed", s.cfg.MaxDecodedBytes)
	}
	return body, 0, nil
}

// bodyCode is the status of a body that could not be read.
func bodyCode(err error) int {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// isJSON tells OTLP's two encodings apart by the content type.
func isJSON(contentType string) (bool, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false, fmt.Errorf("content type %q: %w", contentType, err)
	}
	switch mt {
	case "application/x-protobuf":
		return false, nil
	case "application/json":
		return true, nil
	}
	return false, fmt.Errorf("content type %q: application/x-protobuf or application/json", mt)
}

// respond writes an empty ExportLogsServiceResponse (every record accepted: those
// skipped are counted here, and a retry would not change them).
func respond(w http.ResponseWriter, json bool) int {
	resp := plogotlp.NewExportResponse()
	var b []byte
	var err error
	if json {
		w.Header().Set("Content-Type", "application/json")
		b, err = resp.MarshalJSON()
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, err = resp.MarshalProto()
	}
	if err != nil {
		return fail(w, http.StatusInternalServerError, err.Error())
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return http.StatusOK
}

func retryLater(w http.ResponseWriter, code int, after time.Duration, msg string) int {
	secs := int(after.Round(time.Second) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	return fail(w, code, msg)
}

func fail(w http.ResponseWriter, code int, msg string) int {
	http.Error(w, msg, code)
	return code
}

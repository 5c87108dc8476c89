package lokisource

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// A catch-up's query_range can take Loki longer than its HTTP server's write
// timeout (30 s by default) when Loki is loaded: Loki then closes the connection
// mid-answer, and the same question asked again fails the same way. readSize makes
// the question smaller instead, and larger again once Loki answers.
const (
	// minReadSpan and minReadLimit are the floors of a shrunk window and page.
	minReadSpan  = int64(time.Second)
	minReadLimit = 50
	// growAfter successful pages double a shrunk window and page.
	growAfter = 4
	// minDenseSpan is the floor of a window bounded by the density of lines.
	minDenseSpan = int64(time.Millisecond)
)

// readSize is the window (ns) and page a query's catch-up asks for: Config's
// MaxQueryLength and PageLimit, or less for a while after Loki failed to answer in
// time. The zero value is unset. Guarded by the queryState's mu.
type readSize struct {
	span  int64
	limit int
	ok    int // successful pages since the last change
}

// init sets the configured bounds when unset; true when it did.
func (z *readSize) init(maxSpan int64, maxLimit int) bool {
	if z.span > 0 && z.limit > 0 {
		return false
	}
	*z = readSize{span: maxSpan, limit: maxLimit}
	return true
}

// shrink halves the page and the window, window no longer than asked (the
// configured span is often far longer than a catch-up), down to the floors; false
// when both are at their floors already.
func (z *readSize) shrink(asked int64, maxLimit int) bool {
	floorLimit := min(minReadLimit, maxLimit)
	span := max(minReadSpan, min(z.span, asked)/2)
	limit := max(floorLimit, z.limit/2)
	if span == z.span && limit == z.limit {
		return false
	}
	z.span, z.limit, z.ok = span, limit, 0
	return true
}

// success counts a page Loki answered for a window of asked ns and doubles a
// shrunk size after growAfter of them in a row, up to the bounds; a window already
// longer than what was asked goes back to its bound at once (it no longer limits
// the question). True when the size changed.
func (z *readSize) success(asked, maxSpan int64, maxLimit int) bool {
	if z.span >= maxSpan && z.limit >= maxLimit {
		return false
	}
	z.ok++
	if z.ok < growAfter {
		return false
	}
	if z.span > asked {
		z.span = maxSpan
	}
	z.span = min(maxSpan, 2*z.span)
	z.limit = min(maxLimit, 2*z.limit)
	z.ok = 0
	return true
}

// slowAnswer reports whether err is a query_range failure that a smaller question
// can avoid, and its reason for the metric: "timeout" (the request's own timeout,
// or a network timeout while Loki answered), "eof" (Loki closed the connection
// before or while answering, as its write timeout does) or "status" (a 504, or a
// 5xx that says it timed out). An error a smaller question would not fix (a 400,
// 401/403, connection refused, the caller's cancellation) reports false.
func slowAnswer(ctx context.Context, err error) (string, bool) {
	if err == nil || ctx.Err() != nil {
		return "", false
	}
	var se *statusError
	if errors.As(err, &se) {
		body := strings.ToLower(se.body)
		if se.code == http.StatusGatewayTimeout || (se.code >= 500 &&
			(strings.Contains(body, "timeout") || strings.Contains(body, "deadline exceeded") || strings.Contains(body, "timed out"))) {
			return "status", true
		}
		return "", false
	}
	var oe *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &oe) && oe.Op == "dial") {
		return "", false // not reached: nothing to do with the question's size
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout", true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout", true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return "eof", true
	}
	return "", false
}

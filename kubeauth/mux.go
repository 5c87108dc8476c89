package kubeauth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Mux registers handlers on an http.ServeMux behind an Authorizer: a request is
// served only when its bearer token's identity may perform the handler's action;
// otherwise it gets 401 (no or unknown token), 403 (not allowed), 429 (too many
// token reviews, with Retry-After) or 503 (the apiserver could not answer). A nil Authorizer refuses everything.
type Mux struct {
	mux  *http.ServeMux
	auth Authorizer
	log  *slog.Logger
}

// NewMux returns a Mux that registers on mux.
func NewMux(mux *http.ServeMux, auth Authorizer, log *slog.Logger) *Mux {
	if log == nil {
		log = slog.Default()
	}
	return &Mux{mux: mux, auth: auth, log: log}
}

// Fixed is an action that does not depend on the request.
func Fixed(a Action) func(*http.Request) Action {
	return func(*http.Request) Action { return a }
}

type userKey struct{}

// User is the authorized caller's name, for handlers registered on a Mux.
func User(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// HandleFunc registers h for pattern; action says what the caller needs.
func (m *Mux) HandleFunc(pattern string, action func(*http.Request) Action, h http.HandlerFunc) {
	m.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		user, ok := m.Check(w, r, action(r))
		if !ok {
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

// Check authorizes one more action inside a handler (force on a probe run): true
// when allowed; otherwise it has answered the request.
func (m *Mux) Check(w http.ResponseWriter, r *http.Request, act Action) (user string, ok bool) {
	if m.auth == nil {
		http.Error(w, "no authorizer configured", http.StatusForbidden)
		return "", false
	}
	token := BearerToken(r)
	if token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="faultline"`)
		http.Error(w, "a bearer token is required", http.StatusUnauthorized)
		return "", false
	}
	user, err := m.auth.Authorize(r.Context(), token, act)
	if err != nil {
		code := Status(err)
		switch code {
		case http.StatusTooManyRequests:
			// Not logged: a flood of tokens would become a flood of log lines.
			w.Header().Set("Retry-After", RetryAfterHeader(err))
		case http.StatusUnauthorized, http.StatusForbidden:
			m.log.Warn("request refused", "path", r.URL.Path, "method", r.Method, "user", user, "remote", r.RemoteAddr, "err", err)
		default:
			err = fmt.Errorf("cannot check the caller's token: %w", err)
		}
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="faultline"`)
		}
		http.Error(w, err.Error(), code)
		return user, false
	}
	return user, true
}

// RetryAfterHeader is the Retry-After value for a rate-limited error: whole seconds,
// rounded up, at least 1.
func RetryAfterHeader(err error) string {
	d := RetryAfter(err)
	return strconv.Itoa(int(max((d+time.Second-1)/time.Second, 1)))
}

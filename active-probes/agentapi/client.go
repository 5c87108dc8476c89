package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one node's agent.
type Client struct {
	// BaseURL is the agent's address, e.g. http://10.0.0.7:9402.
	BaseURL string
	// Token returns the bearer token to send (the caller's ServiceAccount token; it is
	// asked for on every request so a rotated projected token is picked up).
	Token func() (string, error)
	// HTTP is the client to use (default: http.DefaultClient; runs can take minutes, so
	// bound them with the request context rather than a client timeout).
	HTTP *http.Client
}

// APIError is a non-2xx answer of the agent.
type APIError struct {
	Code    int
	Message string
	Pods    []string
	// RetryAfter is when a refused caller may come back (429: a rate limit).
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("probe agent: %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// Run runs checks on the agent's node.
func (c *Client) Run(ctx context.Context, req RunRequest) (RunResponse, error) {
	var out RunResponse
	path := PathRun
	if req.Trigger != "" {
		path += "?" + url.Values{QueryTrigger: {req.Trigger}}.Encode()
	}
	return out, c.do(ctx, http.MethodPost, path, req, &out)
}

// Checks lists the probes the agent runs.
func (c *Client) Checks(ctx context.Context) ([]CheckInfo, error) {
	var out []CheckInfo
	return out, c.do(ctx, http.MethodGet, PathChecks, nil, &out)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != nil {
		tok, err := c.Token()
		if err != nil {
			return fmt.Errorf("probe agent: token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("probe agent %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("probe agent %s: read answer: %w", c.BaseURL, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorResponse
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		ae := &APIError{Code: resp.StatusCode, Message: e.Error, Pods: e.Pods}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			ae.RetryAfter = time.Duration(secs) * time.Second
		}
		return ae
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("probe agent %s: answer: %w", c.BaseURL, err)
	}
	return nil
}

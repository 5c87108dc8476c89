package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// LokiEntry is one log line as Loki's query_range returns it.
type LokiEntry struct {
	Time     time.Time
	Line     string
	Labels   map[string]string // the stream's index labels
	Metadata map[string]string // the entry's structured metadata
}

// QueryLoki runs a LogQL log query over [start, end] against the Loki at base,
// forward, at most 1000 entries, with index labels and structured metadata apart
// (categorize-labels). Entries come back in time order.
func QueryLoki(ctx context.Context, base, query string, start, end time.Time) ([]LokiEntry, error) {
	q := url.Values{
		"query":     {query},
		"start":     {strconv.FormatInt(start.UnixNano(), 10)},
		"end":       {strconv.FormatInt(end.UnixNano(), 10)},
		"direction": {"forward"},
		"limit":     {"1000"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/loki/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Loki-Response-Encoding-Flags", "categorize-labels")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query_range %s: %w", query, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("query_range %s: %w", query, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("query_range %s: %s: %s", query, resp.Status, body)
	}
	var r struct {
		Data struct {
			Result []struct {
				Stream map[string]string   `json:"stream"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query_range %s: %w", query, err)
	}
	var out []LokiEntry
	for _, s := range r.Data.Result {
		for _, v := range s.Values {
			if len(v) < 2 {
				return nil, fmt.Errorf("query_range %s: a value of %d elements", query, len(v))
			}
			var ts string
			e := LokiEntry{Labels: s.Stream}
			if err := json.Unmarshal(v[0], &ts); err != nil {
				return nil, fmt.Errorf("query_range %s: time: %w", query, err)
			}
			ns, err := strconv.ParseInt(ts, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("query_range %s: time: %w", query, err)
			}
			e.Time = time.Unix(0, ns)
			if err := json.Unmarshal(v[1], &e.Line); err != nil {
				return nil, fmt.Errorf("query_range %s: line: %w", query, err)
			}
			if len(v) > 2 {
				var cat struct {
					StructuredMetadata map[string]string `json:"structuredMetadata"`
				}
				if err := json.Unmarshal(v[2], &cat); err != nil {
					return nil, fmt.Errorf("query_range %s: metadata: %w", query, err)
				}
				e.Metadata = cat.StructuredMetadata
			}
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b LokiEntry) int { return a.Time.Compare(b.Time) })
	return out, nil
}

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

	"github.com/faultline-dev/faultline/test/eventually"
)

// lokiQueryLimit is the most entries one query asks for: Loki's default
// max_entries_limit_per_query. An answer that reaches it may be cut short, so it
// is an error rather than a silent subset.
const lokiQueryLimit = 5000

// LokiEntry is one log line as Loki's query_range returns it.
type LokiEntry struct {
	Time     time.Time
	Line     string
	Labels   map[string]string // the stream's index labels
	Metadata map[string]string // the entry's structured metadata
}

// QueryLoki runs a LogQL log query over [start, end] against the Loki at base,
// forward, with index labels and structured metadata apart (categorize-labels).
// Entries come back in time order (equal times in Loki's order); an answer of
// lokiQueryLimit entries or more is an error, as it may be incomplete.
func QueryLoki(ctx context.Context, base, query string, start, end time.Time) ([]LokiEntry, error) {
	q := url.Values{
		"query":     {query},
		"start":     {strconv.FormatInt(start.UnixNano(), 10)},
		"end":       {strconv.FormatInt(end.UnixNano(), 10)},
		"direction": {"forward"},
		"limit":     {strconv.Itoa(lokiQueryLimit)},
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
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Stream map[string]string   `json:"stream"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query_range %s: %w", query, err)
	}
	if r.Status != "success" || r.Data.ResultType != "streams" {
		return nil, fmt.Errorf("query_range %s: status %q, result type %q, want a log query's streams", query, r.Status, r.Data.ResultType)
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
	if len(out) >= lokiQueryLimit {
		return nil, fmt.Errorf("query_range %s: %d entries, the limit: the answer may be incomplete; narrow the query", query, len(out))
	}
	// Streams come one after another: order all entries by time.
	slices.SortStableFunc(out, func(a, b LokiEntry) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// WaitLoki polls QueryLoki over the last two hours (to an hour ahead) until it
// returns at least n entries, and returns all it returned then; it fails the test
// once timeout has passed.
func WaitLoki(t TB, base, query string, n int, timeout time.Duration) []LokiEntry {
	t.Helper()
	var got []LokiEntry
	eventually.NoError(t, timeout, fmt.Sprintf("%d entries for %s", n, query), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout) // a hung Loki ends the attempt
		defer cancel()
		var err error
		got, err = QueryLoki(ctx, base, query, time.Now().Add(-2*time.Hour), time.Now().Add(time.Hour))
		if err == nil && len(got) < n {
			err = fmt.Errorf("%d entries so far", len(got))
		}
		return err
	})
	return got
}

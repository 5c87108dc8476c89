package probe

import (
	"fmt"
	"time"
)

// LimitError refuses a run because one of the node's limits is reached (Limit names
// it: "iperf3_servers"); the caller may retry after RetryAfter. Runner.Run returns it
// as an error, not a result, and records nothing: the node was not examined.
type LimitError struct {
	Limit      string
	Reason     string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("limit %s reached: %s (retry in %s)", e.Limit, e.Reason, e.RetryAfter.Round(time.Second))
}

// DefaultMaxIperf3Servers bounds the one-shot iperf3 servers waiting on a node at
// once when Config.MaxIperf3Servers is unset.
const DefaultMaxIperf3Servers = 4

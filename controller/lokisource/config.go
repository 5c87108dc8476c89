package lokisource

import (
	"log/slog"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultQueryTimeout is Config.QueryTimeout's default: below Loki's default
// http_server_write_timeout of 30s.
const DefaultQueryTimeout = 20 * time.Second

// Config configures a Source. Only URL and Queries are required.
type Config struct {
	// URL is Loki's base URL (http or https), for example http://loki:3100 or
	// https://gateway.example/loki; the API paths are appended to it.
	URL string
	// Tenant is sent as X-Scope-OrgID when set.
	Tenant string
	// BearerToken, or BearerTokenFile (read again for every request, as projected
	// service account tokens rotate), or Username and Password (basic auth).
	BearerToken     string
	BearerTokenFile string
	Username        string
	Password        string
	// TLS configures https and wss connections.
	TLS TLSConfig

	// Queries are the LogQL log queries to follow, with unique names.
	Queries []Query
	// NodeLabel names the label (index label or structured metadata) holding an
	// entry's node; default "node".
	NodeLabel string
	// PageLimit is query_range's limit per page and the tail's limit; default
	// DefaultPageLimit, Loki's default max_entries_limit_per_query. A page Loki
	// refuses as over its limit is asked again at the limit Loki names, and so are
	// the pages after it. Under load Loki's cost is mostly per page (every
	// selected stream is looked up and opened), not per line.
	PageLimit int
	// DelayFor is the tail's delay_for (0 to 5 s, whole seconds): how long Loki holds
	// entries to order them.
	DelayFor time.Duration
	// Backoff between attempts while Loki is unreachable or failing.
	Backoff Backoff

	// Overlap is how far back (in entry time) a query re-reads after a reconnect or
	// a restart, to pick up lines that reached Loki late; default 30s. Lines that
	// reach Loki later than this (an exporter's backlog, a node clock running
	// behind) are read only by the tail, so raise it when nodes' clocks lag.
	Overlap time.Duration
	// DedupeWindow is how long (in entry time) a query remembers the entries it
	// emitted; default 10m, at least 2*Overlap.
	DedupeWindow time.Duration
	// MaxDedupeKeys bounds the entries remembered per query (the window shrinks
	// when more arrive); default 200000.
	MaxDedupeKeys int
	// CheckpointKeys bounds the entries a checkpoint lists per query; default 1000.
	CheckpointKeys int
	// MaxCatchUp, when set, limits how far back a query reads: a position older
	// than now-MaxCatchUp starts there instead (logged as a gap).
	MaxCatchUp time.Duration
	// QueryTimeout bounds one query_range request, answer read included; default
	// DefaultQueryTimeout. A catch-up page that takes longer is asked again for a
	// shorter window and a smaller page (as is one Loki cuts off), so keep it below
	// Loki's server.http_server_write_timeout (30s by default): past that, Loki ends
	// the answer anyway.
	QueryTimeout time.Duration
	// MaxQueryLength is Loki's max_query_length (limits_config): a catch-up asks
	// for windows no longer than this; default 721h, Loki's default.
	MaxQueryLength time.Duration
	// MaxResponseBytes bounds one query_range response body and one tail message;
	// default 16 MiB. A page over it is asked again with half the entries; a tail
	// message over it ends the tail, and the catch-up that follows reads its lines.
	MaxResponseBytes int64
	// CreationGracePeriod is Loki's creation_grace_period: how far ahead of its
	// clock Loki accepts a line. Reads reach that far into the future, because
	// Loki's tail holds a line until its timestamp has passed: a node clock that
	// leads would otherwise delay its lines by as much; default 10m, Loki's default.
	CreationGracePeriod time.Duration
	// ClockTolerance: a line the tail delivers (so it reached Loki just now) with a
	// timestamp more than this before the controller's clock is dated when it
	// arrived, and no line is dated after the controller's clock, so a node clock
	// that lags or leads moves no fault's time; default 1m.
	ClockTolerance time.Duration
	// BootID, when set, returns the node's current boot ID (the Node's
	// status.nodeInfo.bootID, "" when unknown). A line carrying another boot ID
	// (logstream.MetaBootID) older than the moment the current boot ID was first
	// seen comes from an earlier boot: it is skipped and counted, so a long
	// catch-up cannot fault a node again for what happened before its reboot.
	BootID func(node string) string
	// PollInterval: while tailing, the query is also read with query_range this
	// often, because Loki's tail drops lines under load without reporting them;
	// default 2s. While the tail drops lines, polls run every 150 ms instead (or half
	// as long as the last one took, if longer). Each poll reads on from where the
	// previous one started, less its interval (at least 250 ms); once a second of
	// lines is 5 s old, an audit has Loki count its lines and reads it again if Loki
	// holds lines not read (lines that reach Loki late).
	PollInterval time.Duration
	// Backstop, when set and true, says another path delivers the lines as they
	// are written (the collector's push to the controller's intake): a line the
	// tail drops is decided already, so polls keep PollInterval instead of
	// speeding up, and spare Loki (which shares its machines) the fast polls.
	Backstop func() bool
	// TailIdleTimeout: a tail that sends nothing, not even a ping (Loki pings every
	// second), for this long is considered dead; default 30s.
	TailIdleTimeout time.Duration

	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics defaults to none; see NewPrometheusMetrics.
	Metrics Metrics
}

// DefaultPageLimit is Config.PageLimit's default: Loki's default
// max_entries_limit_per_query. At 20,000 streams and 2,000 candidate lines/s, pages
// of 1,000 lines left the reading 20 s and more behind on a loaded Loki; pages of
// 5,000 kept up (docs/scale.md).
const DefaultPageLimit = 5000

// TLSConfig configures TLS to Loki.
type TLSConfig struct {
	// CAFile holds the PEM certificates to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a client certificate (read again at each handshake).
	CertFile string
	KeyFile  string
	// ServerName overrides the name verified in the server certificate.
	ServerName         string
	InsecureSkipVerify bool
}

// Backoff is an exponential backoff with jitter: attempt n waits a random time
// between half and all of min(Initial*2^n, Max).
type Backoff struct {
	Initial time.Duration // default 500ms
	Max     time.Duration // default 30s
}

// steps is b as a wait.Backoff: its steps double from half of Initial up to half
// of Max, and its jitter adds up to as much again.
func (b Backoff) steps() wait.Backoff {
	return wait.Backoff{Duration: b.Initial / 2, Factor: 2, Jitter: 1, Cap: b.Max / 2, Steps: math.MaxInt32}
}

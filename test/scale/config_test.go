package scale_test

import (
	"os"
	"strconv"
	"testing"
)

// config is one run's size. make test runs the defaults (a reduced fleet); make
// bench-scale sets the environment for the full one.
type config struct {
	nodes      int // kwok GPU nodes
	burst      int // distinct nodes with an Xid 79 at once
	samples    int // single Xid 79 lines on quiet nodes, for line → taint latency
	candRate   int // candidate lines per second (pass the LogQL filter, taint nothing)
	benignRate int // benign kernel lines per second, round robin over every node
	apiQPS     int // the controller's --kube-api-qps; 0: its default
	actWorkers int // the controller's --act-workers; 0: its default
	// nodeMeta: the node is structured metadata of each line, not a stream label,
	// so one stream carries every node (Loki's OTLP intake without node promoted).
	nodeMeta bool
	// viaCollector: the lines go through the OpenTelemetry Collector, which writes
	// them to Loki and pushes them to the controller's intake, as the chart sets it
	// up; otherwise they are written to Loki's push API and only read from Loki.
	viaCollector bool
}

// Environment variables that size a run.
const (
	envNodes   = "FAULTLINE_SCALE_NODES"
	envBurst   = "FAULTLINE_SCALE_BURST"
	envSamples = "FAULTLINE_SCALE_SAMPLES"
	envRate    = "FAULTLINE_SCALE_CANDIDATE_RATE"
	envBenign  = "FAULTLINE_SCALE_BENIGN_RATE"
	envAPIQPS  = "FAULTLINE_SCALE_KUBE_API_QPS"
	envWorkers = "FAULTLINE_SCALE_ACT_WORKERS"
	envNodeIn  = "FAULTLINE_SCALE_NODE_IN" // "label" (default) or "metadata"
	envLog     = "FAULTLINE_SCALE_LOG"     // a file to write the controller's log to
	envPath    = "FAULTLINE_SCALE_PATH"    // "collector" (default) or "loki"
)

// Limits keep a mistyped variable from asking for more than one machine can hold.
const (
	maxNodes = 100_000
	maxRate  = 50_000
)

func loadConfig(t *testing.T) config {
	t.Helper()
	c := config{
		nodes:   envInt(t, envNodes, 2000, 10, maxNodes),
		samples: envInt(t, envSamples, 40, 1, 1000),
	}
	c.burst = envInt(t, envBurst, c.nodes/10, 1, c.nodes)
	c.candRate = envInt(t, envRate, 200, 0, maxRate)
	// Every node sends a benign line every 10 s on average.
	c.benignRate = envInt(t, envBenign, c.nodes/10, 0, maxRate)
	c.apiQPS = envInt(t, envAPIQPS, 0, 0, maxRate)
	c.actWorkers = envInt(t, envWorkers, 0, 0, 1024)
	switch v := os.Getenv(envNodeIn); v {
	case "", "label":
	case "metadata":
		c.nodeMeta = true
	default:
		t.Fatalf("%s=%q: want label or metadata", envNodeIn, v)
	}
	switch v := os.Getenv(envPath); v {
	case "", "collector":
		c.viaCollector = true
	case "loki":
	default:
		t.Fatalf("%s=%q: want collector or loki", envPath, v)
	}
	if c.samples+c.burst >= c.nodes {
		t.Fatalf("%d nodes cannot hold %d latency samples, a burst of %d on distinct nodes and quiet ones",
			c.nodes, c.samples, c.burst)
	}
	return c
}

func envInt(t *testing.T, name string, def, lo, hi int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		t.Fatalf("%s=%q: want an integer in [%d, %d]", name, s, lo, hi)
	}
	return v
}

package exporter_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/eventually"
)

// TestLaneOfAnotherSource: a Lane ships another program's records (here NVML event
// lines) the exporter's way: a refused batch is retried, never dropped, while Healthy
// and the metrics (labelled with the lane's source) say so; accepted, it is counted.
func TestLaneOfAnotherSource(t *testing.T) {
	var (
		mu     sync.Mutex
		refuse = true
		got    collected
	)
	srv := newFakeReceiver(t, func(p pushed) int {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return http.StatusBadRequest
		}
		got.add(p)
		return http.StatusNoContent
	})
	m := exporter.NewMetrics(prometheus.NewRegistry())
	lane, err := exporter.NewLane(ship.SourceNVML, exporter.Config{Sender: ship.NewLoki(srv, ship.LokiOptions{}), Metrics: m,
		BatchWait: 10 * time.Millisecond, Backoff: ship.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lane.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	line := "NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-1)"
	if !lane.Ship(ctx, ship.Record{Time: time.Now(), Body: line, Node: "gpu-1", Level: 3}) {
		t.Fatal("Ship refused the record")
	}
	eventually.NoError(t, 5*time.Second, "Healthy and the metric reporting the refusal", func() error {
		if err := lane.Healthy(); err == nil || !strings.Contains(err.Error(), "refuses nvml records") {
			return fmt.Errorf("Healthy = %v", err)
		}
		if v := testutil.ToFloat64(m.Refusing(ship.SourceNVML)); v != 1 {
			return fmt.Errorf("receiver_refusing{source=nvml} = %v, want 1", v)
		}
		return nil
	})
	mu.Lock()
	refuse = false
	mu.Unlock()
	eventually.True(t, 5*time.Second, "the line once the receiver accepts it", func() bool {
		_, other := got.get()
		return slices.Equal(other, []string{line})
	})
	eventually.NoError(t, 5*time.Second, "healthy again", lane.Healthy)
	if v := testutil.ToFloat64(m.Shipped(ship.SourceNVML)); v != 1 {
		t.Errorf("shipped{source=nvml} = %v, want 1", v)
	}
	if _, err := exporter.NewLane(ship.SourceNVML, exporter.Config{}); err == nil {
		t.Error("a lane without a sender was made")
	}
}

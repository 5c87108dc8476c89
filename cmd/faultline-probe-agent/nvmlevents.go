package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/faultline-dev/faultline/active-probes/nvmlevents"
	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/logstream"
)

// nvmlEventFlags are the probe agent's flags for its second log source: NVML events
// shipped as source="nvml" lines through the dmesg-exporter's shipping path.
type nvmlEventFlags struct {
	enabled bool
	otlpURL string
	lokiURL string
	tenant  string
	auth    ship.Auth
}

func (f *nvmlEventFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "nvml-events", false, "watch the GPUs' NVML events (Xid, ECC, clock, power source) and ship each as a log line with source=\"nvml\" (needs --events-otlp-endpoint or --events-loki-url)")
	fs.StringVar(&f.otlpURL, "events-otlp-endpoint", "", "OTLP/HTTP base URL of the collector the NVML event lines go to, as the dmesg-exporter's --otlp-endpoint")
	fs.StringVar(&f.lokiURL, "events-loki-url", "", "Loki base URL for direct push of the NVML event lines")
	fs.StringVar(&f.tenant, "events-loki-tenant", "", "X-Scope-OrgID for Loki")
	fs.StringVar(&f.auth.TokenFile, "events-token-file", "", "bearer token sent to the receiver, re-read as it rotates (the chart's projected ServiceAccount token with audience faultline-collector)")
	fs.StringVar(&f.auth.CAFile, "events-ca-file", "", "PEM CA certificates that verify an https:// receiver")
}

// check refuses flags that cannot work, before the agent connects to anything.
func (f *nvmlEventFlags) check() error {
	if f.enabled && (f.otlpURL == "") == (f.lokiURL == "") {
		return errors.New("--nvml-events: set exactly one of --events-otlp-endpoint and --events-loki-url")
	}
	if !f.enabled && (f.otlpURL != "" || f.lokiURL != "") {
		return errors.New("--events-otlp-endpoint and --events-loki-url need --nvml-events")
	}
	return nil
}

// nvmlEvents runs the watcher and its lane.
type nvmlEvents struct {
	lane   *exporter.Lane
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start checks the flags and starts watching and shipping until ctx is done; nil
// when --nvml-events is off. A node where NVML cannot be used, or whose GPUs support
// no watched event, is logged and the agent goes on with its probes.
func (f *nvmlEventFlags) start(ctx context.Context, node, nvmlLibrary string, reg prometheus.Registerer, log *slog.Logger) (*nvmlEvents, error) {
	if !f.enabled {
		return nil, nil
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	client, err := f.auth.Client()
	if err != nil {
		return nil, fmt.Errorf("--nvml-events: %w", err)
	}
	cfg := exporter.Config{Metrics: exporter.NewMetrics(reg), Log: log.With("source", logstream.SourceNVML)}
	if f.otlpURL != "" {
		cfg.Sender = ship.NewOTLP(f.otlpURL, ship.OTLPOptions{Gzip: true, Client: client})
	} else {
		cfg.Sender = ship.NewLoki(f.lokiURL, ship.LokiOptions{Tenant: f.tenant, Client: client})
	}
	lane, err := exporter.NewLane(logstream.SourceNVML, cfg)
	if err != nil {
		return nil, err
	}
	w, err := nvmlevents.Open(nvmlLibrary, nvmlevents.Config{
		Ship:    func(ctx context.Context, l nvmlevents.Line) bool { return lane.Ship(ctx, l.Record(node)) },
		Metrics: nvmlevents.NewMetrics(reg),
		Log:     log,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &nvmlEvents{lane: lane, cancel: cancel}
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		if err := lane.Run(ctx); err != nil {
			log.Error("shipping NVML events stopped", "err", err)
		}
	}()
	go func() {
		defer e.wg.Done()
		switch err := w.Run(ctx); {
		case errors.Is(err, nvmlevents.ErrNoNVML), errors.Is(err, nvmlevents.ErrNothingToWatch):
			log.Warn("no NVML events on this node", "err", err)
		case err != nil:
			log.Error("watching NVML events stopped", "err", err)
		}
	}()
	return e, nil
}

// healthy fails while the receiver refuses the event lines (/healthz/nvml-events).
func (e *nvmlEvents) healthy() error {
	if e == nil {
		return nil
	}
	return e.lane.Healthy()
}

// stop ends the watcher and returns once the lane shipped what it held (within the
// lane's shutdown grace).
func (e *nvmlEvents) stop() {
	if e != nil {
		e.cancel()
		e.wg.Wait()
	}
}

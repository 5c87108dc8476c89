package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/nvmlevents"
	"github.com/faultline-dev/faultline/active-probes/probelines"
	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/logstream"
)

// lineFlags are the probe agent's flags for the log lines it ships itself through
// the dmesg-exporter's shipping path: NVML events (source="nvml") and the verdict of
// every check it runs (source="probe"), to one receiver.
type lineFlags struct {
	nvmlEvents bool
	clockEvery time.Duration
	verdicts   bool
	otlpURL    string
	lokiURL    string
	tenant     string
	auth       ship.Auth
}

func (f *lineFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.nvmlEvents, "nvml-events", false, "watch the GPUs' NVML events (Xid, ECC, clock, power source) and ship each as a log line with source=\"nvml\" (needs --events-otlp-endpoint or --events-loki-url)")
	fs.DurationVar(&f.clockEvery, "nvml-clock-interval", time.Minute, "least time between two clock-change lines of a GPU (a GPU under load changes clocks several times a second); the changes in between are counted, not shipped")
	fs.BoolVar(&f.verdicts, "verdict-lines", true, "ship the verdict of every check the agent runs as a log line with source=\"probe\" (to --events-otlp-endpoint or --events-loki-url; none without them)")
	fs.StringVar(&f.otlpURL, "events-otlp-endpoint", "", "OTLP/HTTP base URL of the collector the agent's lines (NVML events, verdicts) go to, as the dmesg-exporter's --otlp-endpoint")
	fs.StringVar(&f.lokiURL, "events-loki-url", "", "Loki base URL for direct push of the agent's lines")
	fs.StringVar(&f.tenant, "events-loki-tenant", "", "X-Scope-OrgID for Loki")
	fs.StringVar(&f.auth.TokenFile, "events-token-file", "", "bearer token sent to the receiver, re-read as it rotates (the chart's projected ServiceAccount token with audience faultline-collector)")
	fs.StringVar(&f.auth.CAFile, "events-ca-file", "", "PEM CA certificates that verify an https:// receiver")
}

// receiver reports whether a receiver is set.
func (f *lineFlags) receiver() bool { return f.otlpURL != "" || f.lokiURL != "" }

// check refuses flags that cannot work, before the agent connects to anything.
func (f *lineFlags) check() error {
	if f.otlpURL != "" && f.lokiURL != "" {
		return errors.New("set at most one of --events-otlp-endpoint and --events-loki-url")
	}
	if f.nvmlEvents && !f.receiver() {
		return errors.New("--nvml-events: set exactly one of --events-otlp-endpoint and --events-loki-url")
	}
	if !f.nvmlEvents && !f.verdicts && f.receiver() {
		return errors.New("--events-otlp-endpoint and --events-loki-url need --nvml-events or --verdict-lines")
	}
	return nil
}

// shippedLines runs the lanes of the agent's lines and their producers.
type shippedLines struct {
	lanes    map[string]*exporter.Lane
	verdicts *probelines.Lines
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// start checks the flags and starts shipping until ctx is done; nil when no
// receiver is set. A node where NVML cannot be used, or whose GPUs support no
// watched event, is logged and the agent goes on with its probes.
func (f *lineFlags) start(ctx context.Context, node, nvmlLibrary string, reg prometheus.Registerer, log *slog.Logger) (*shippedLines, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if !f.receiver() {
		return nil, nil
	}
	client, err := f.auth.Client()
	if err != nil {
		return nil, fmt.Errorf("agent lines: %w", err)
	}
	metrics := exporter.NewMetrics(reg)
	newLane := func(source string) (*exporter.Lane, error) {
		cfg := exporter.Config{Metrics: metrics, Log: log.With("source", source)}
		if f.otlpURL != "" {
			cfg.Sender = ship.NewOTLP(f.otlpURL, ship.OTLPOptions{Gzip: true, Client: client})
		} else {
			cfg.Sender = ship.NewLoki(f.lokiURL, ship.LokiOptions{Tenant: f.tenant, Client: client})
		}
		return exporter.NewLane(source, cfg)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &shippedLines{lanes: map[string]*exporter.Lane{}, cancel: cancel}
	fail := func(err error) (*shippedLines, error) {
		cancel()
		s.wg.Wait()
		return nil, err
	}
	run := func(source string) (*exporter.Lane, error) {
		lane, err := newLane(source)
		if err != nil {
			return nil, err
		}
		s.lanes[source] = lane
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := lane.Run(ctx); err != nil {
				log.Error("shipping lines stopped", "source", source, "err", err)
			}
		}()
		return lane, nil
	}
	if f.verdicts {
		lane, err := run(logstream.SourceProbe)
		if err != nil {
			return fail(err)
		}
		if s.verdicts, err = probelines.New(probelines.Config{Node: node, Ship: lane.Ship,
			Metrics: probelines.NewMetrics(reg), Log: log}); err != nil {
			return fail(err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.verdicts.Run(ctx)
		}()
	}
	if f.nvmlEvents {
		lane, err := run(logstream.SourceNVML)
		if err != nil {
			return fail(err)
		}
		w, err := nvmlevents.Open(nvmlLibrary, nvmlevents.Config{
			Ship:          func(ctx context.Context, l nvmlevents.Line) bool { return lane.Ship(ctx, l.Record(node)) },
			ClockInterval: f.clockEvery,
			Metrics:       nvmlevents.NewMetrics(reg),
			Log:           log,
		})
		if err != nil {
			return fail(err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			switch err := w.Run(ctx); {
			case errors.Is(err, nvmlevents.ErrNoNVML), errors.Is(err, nvmlevents.ErrNothingToWatch):
				log.Warn("no NVML events on this node", "err", err)
			case err != nil:
				log.Error("watching NVML events stopped", "err", err)
			}
		}()
	}
	return s, nil
}

// verdictSink is where the agent reports its results: nil when verdict lines are off.
func (s *shippedLines) verdictSink() agent.Verdicts {
	if s == nil || s.verdicts == nil {
		return nil
	}
	return s.verdicts
}

// healthy fails while the receiver refuses a source's lines
// (/healthz/nvml-events, /healthz/verdict-lines).
func (s *shippedLines) healthy(source string) func() error {
	return func() error {
		if s == nil || s.lanes[source] == nil {
			return nil
		}
		return s.lanes[source].Healthy()
	}
}

// stop ends the producers and returns once the lanes shipped what they held
// (within the lanes' shutdown grace).
func (s *shippedLines) stop() {
	if s != nil {
		s.cancel()
		s.wg.Wait()
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/intake"
	"github.com/faultline-dev/faultline/controller/leaderendpoint"
	"github.com/faultline-dev/faultline/kubeauth"
)

// intakeCertReload is how often the intake's serving certificate is read again.
const intakeCertReload = time.Minute

// intakeFlags configure the listener the collector pushes lines to: HTTPS only,
// since its callers send their bearer token.
type intakeFlags struct {
	listen, certFile, keyFile, audience string
	endpointSlice, advertise            string
	maxBodyBytes                        int64
}

func (s *intakeFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.listen, "intake-listen", "", "address of the HTTPS listener the OpenTelemetry Collector pushes log lines to (OTLP/HTTP, POST /v1/logs), decided by the leader as they arrive instead of after Loki's reading delivers them (empty: off; needs --intake-tls-cert-file and --intake-tls-key-file)")
	f.StringVar(&s.certFile, "intake-tls-cert-file", "", "serving certificate of --intake-listen (read again every minute)")
	f.StringVar(&s.keyFile, "intake-tls-key-file", "", "key of --intake-tls-cert-file")
	f.StringVar(&s.audience, "intake-audience", intake.DefaultAudience, "audience the pushing collector's ServiceAccount token must carry (it also needs RBAC create on loglines.faultline.io)")
	f.StringVar(&s.endpointSlice, "intake-endpointslice", "", "EndpointSlice (in --namespace, created beforehand, as the chart does) in which the leader publishes --intake-advertise-address as the intake's only endpoint, so the collector reaches the leader (empty: not published)")
	f.StringVar(&s.advertise, "intake-advertise-address", "", "this replica's IP address, published in --intake-endpointslice while it leads (the chart passes the pod IP)")
	f.Int64Var(&s.maxBodyBytes, "intake-max-body-bytes", intake.DefaultMaxBodyBytes, "largest request body accepted as sent (compressed or not); 413 past it")
}

// whileLeading returns what the leader runs for the intake: publishing its address
// in --intake-endpointslice (nil when not asked for).
func (s *intakeFlags) whileLeading(client kubernetes.Interface, namespace string, log *slog.Logger) (func(context.Context), error) {
	if s.endpointSlice == "" {
		if s.advertise != "" {
			return nil, errors.New("--intake-advertise-address needs --intake-endpointslice")
		}
		return nil, nil
	}
	if s.listen == "" {
		return nil, errors.New("--intake-endpointslice needs --intake-listen")
	}
	if _, err := netip.ParseAddr(s.advertise); err != nil {
		return nil, fmt.Errorf("--intake-advertise-address %q: an IP address is needed with --intake-endpointslice: %w", s.advertise, err)
	}
	_, p, err := net.SplitHostPort(s.listen)
	if err != nil {
		return nil, fmt.Errorf("--intake-listen %q: %w", s.listen, err)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("--intake-listen %q: a port number is needed to publish it", s.listen)
	}
	return func(ctx context.Context) {
		leaderendpoint.Keep(ctx, client, namespace, s.endpointSlice, s.advertise, int32(port), intakePortName, log)
	}, nil
}

// intakePortName names the intake's port in its Service and EndpointSlice.
const intakePortName = "intake"

// serve starts the intake when --intake-listen is set; stop shuts it down.
func (s *intakeFlags) serve(client kubernetes.Interface, c *controller.Controller, nodeLabel string, sources []string, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	if s.listen == "" {
		if s.certFile != "" || s.keyFile != "" {
			return nil, errors.New("--intake-tls-cert-file and --intake-tls-key-file need --intake-listen")
		}
		return func() {}, nil
	}
	if s.certFile == "" || s.keyFile == "" {
		return nil, errors.New("--intake-listen needs --intake-tls-cert-file and --intake-tls-key-file: pushed lines are never taken over plain HTTP")
	}
	if s.audience == "" {
		return nil, errors.New("--intake-audience must not be empty: a token for another audience must not push lines")
	}
	if s.maxBodyBytes <= 0 {
		return nil, fmt.Errorf("--intake-max-body-bytes (%d) must be positive", s.maxBodyBytes)
	}
	rateLimited := prometheus.NewCounter(prometheus.CounterOpts{Name: "faultline_controller_intake_reviews_rate_limited_total",
		Help: "Pushes refused with 429 because the token reviews per second for tokens not cached were spent."})
	reg.MustRegister(rateLimited)
	srv, err := intake.New(intake.Config{
		Auth:         &kubeauth.Reviewer{Client: client, Audiences: []string{s.audience}, RateLimited: rateLimited},
		Lines:        intake.Converter{NodeLabel: nodeLabel, Sources: slices.Sorted(slices.Values(sources))},
		Deliver:      c.Push,
		MaxBodyBytes: s.maxBodyBytes,
		Metrics:      intake.NewMetrics(reg),
		Log:          log,
	})
	if err != nil {
		return nil, err
	}
	at, stop, err := serveHTTPS(s.listen, s.certFile, s.keyFile, "--intake-tls-cert-file", intakeCertReload, srv.Handler(), intake.MaxHeaderBytes, log)
	if err != nil {
		return nil, err
	}
	log.Info("intake listening (HTTPS)", "listen", at, "audience", s.audience)
	return stop, nil
}

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/statusapi"
)

// statusCertReload is how often /status's serving certificate is read again (a
// renewed Secret changes its volume in place).
const statusCertReload = time.Minute

// statusFlags configure the listener of Autopilot's GET /status: HTTPS only, since
// its callers send their bearer token.
type statusFlags struct {
	listen, certFile, keyFile string
	runsPerSecond             float64
}

func (s *statusFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.listen, "status-listen", "", "address of the HTTPS listener of Autopilot's GET /status, which creates a ProbeRun with the caller's own token and answers when it is done (empty: off; needs --status-tls-cert-file and --status-tls-key-file)")
	f.StringVar(&s.certFile, "status-tls-cert-file", "", "serving certificate of --status-listen (read again every minute)")
	f.StringVar(&s.keyFile, "status-tls-key-file", "", "key of --status-tls-cert-file")
	f.Float64Var(&s.runsPerSecond, "status-runs-per-second", statusapi.DefaultRunsPerSecond, "ProbeRuns /status may create per second (bursts of twice as many); more get 429 with a Retry-After")
}

// serve starts the /status listener when --status-listen is set; stop shuts it down.
func (s *statusFlags) serve(rc *rest.Config, client kubernetes.Interface, c *controller.Controller, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	if s.listen == "" {
		if s.certFile != "" || s.keyFile != "" {
			return nil, errors.New("--status-tls-cert-file and --status-tls-key-file need --status-listen")
		}
		return func() {}, nil
	}
	if s.certFile == "" || s.keyFile == "" {
		return nil, errors.New("--status-listen needs --status-tls-cert-file and --status-tls-key-file: /status is never served over plain HTTP")
	}
	if s.runsPerSecond <= 0 {
		return nil, fmt.Errorf("--status-runs-per-second (%g) must be positive", s.runsPerSecond)
	}
	runs, err := v1alpha1.NewRESTClient(client)
	if err != nil {
		return nil, err
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faultline_controller_status_refused_total",
		Help: "GET /status requests refused with 429, by reason: rate (the ProbeRuns per second were spent), waiting (as many requests already wait for their runs)."}, []string{"reason"})
	reg.MustRegister(refused)
	srv, err := statusapi.New(statusapi.Config{APIServer: rc, Runs: runs, Nodes: c.Triggers().ProbeNodes,
		DefaultChecks: probe.Default().DefaultEnabled(), RunsPerSecond: s.runsPerSecond, Burst: int(2 * s.runsPerSecond),
		Refused: refused, Log: log})
	if err != nil {
		return nil, err
	}
	at, stop, err := serveHTTPS(s.listen, s.certFile, s.keyFile, "--status-tls-cert-file", statusCertReload, srv.Handler(), statusapi.MaxHeaderBytes, log)
	if err != nil {
		return nil, err
	}
	log.Info("/status listening (HTTPS)", "listen", at)
	return stop, nil
}

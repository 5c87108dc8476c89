// Package daemon holds what faultline's long-running programs (the controller and the
// exporter in the faultline binary, the probe agent in its own) share: the Kubernetes
// client they build from --kubeconfig, and the HTTP server of their /metrics, health
// checks and API.
package daemon

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/faultline-dev/faultline/internal/buildinfo"
)

// KubeClient builds a client from kubeconfig, $KUBECONFIG or the in-cluster config.
func KubeClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := KubeRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// KubeRESTConfig loads kubeconfig, $KUBECONFIG or the in-cluster config.
func KubeRESTConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	cfg.UserAgent = "faultline/" + buildinfo.Version()
	return cfg, nil
}

// ServeHTTP serves /metrics and the health checks (path → check; 503 with the
// check's error when it fails) on addr in the background, and api under /api/; with
// tlsConf, all of it over TLS.
func ServeHTTP(addr string, tlsConf *tls.Config, reg *prometheus.Registry, checks map[string]func() error, api ...http.Handler) (*http.Server, error) {
	mux := http.NewServeMux()
	for _, h := range api {
		mux.Handle("/api/", h)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	for path, check := range checks {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	go srv.Serve(ln)
	return srv, nil
}

package proberun

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/faultline-dev/faultline/certreload"
)

// caReload is how often the CA file is read again: the chart mounts it from a
// Secret, which changes in place when the certificates are renewed.
const caReload = time.Minute

// AgentClient returns the HTTP client the controller calls the agents with: TLS
// verified against the CA in caFile only (not the system roots; read again every
// minute), with serverName as the name the agents' certificate must carry (empty:
// the host of the URL). The chart's agents share one certificate for the name of
// their Service, reached at each pod's address, so serverName is that name.
func AgentClient(caFile, serverName string) (*http.Client, error) {
	ca, err := certreload.Load(caReload, func() (*x509.CertPool, error) {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("probe agents' CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("probe agents' CA: " + caFile + " holds no PEM certificate")
		}
		return pool, nil
	})
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// No proxy: the agents are reached directly at their pods' addresses.
	tr.Proxy = nil
	tr.ForceAttemptHTTP2 = false
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		name := serverName
		if name == "" {
			var err error
			if name, _, err = net.SplitHostPort(addr); err != nil {
				return nil, err
			}
		}
		d := tls.Dialer{NetDialer: dialer, Config: &tls.Config{RootCAs: ca.Get(), ServerName: name, MinVersion: tls.VersionTLS12}}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: tr}, nil
}

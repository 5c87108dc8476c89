package proberun

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// AgentClient returns the HTTP client the controller calls the agents with: TLS
// verified against the CA in caFile only (not the system roots), with serverName as
// the name the agents' certificate must carry (empty: the host of the URL). The
// chart's agents share one certificate for the name of their Service, reached at
// each pod's address, so serverName is that name.
func AgentClient(caFile, serverName string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("probe agents' CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("probe agents' CA: " + caFile + " holds no PEM certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
	// No Proxy: the agents are reached directly at their pods' addresses.
	tr.Proxy = nil
	tr.ResponseHeaderTimeout = 0 // runs take minutes; the request context bounds them
	tr.TLSHandshakeTimeout = 10 * time.Second
	return &http.Client{Transport: tr}, nil
}

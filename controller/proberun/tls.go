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
	"sync"
	"time"
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
	ca := &caPool{file: caFile}
	if _, err := ca.load(); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// No proxy: the agents are reached directly at their pods' addresses.
	tr.Proxy = nil
	tr.ForceAttemptHTTP2 = false
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		pool, err := ca.get()
		if err != nil {
			return nil, err
		}
		name := serverName
		if name == "" {
			if name, _, err = net.SplitHostPort(addr); err != nil {
				return nil, err
			}
		}
		d := tls.Dialer{NetDialer: dialer, Config: &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: tr}, nil
}

// caPool is the CA file's certificates, read again at most every caReload.
type caPool struct {
	file string

	mu   sync.Mutex
	pool *x509.CertPool
	at   time.Time
}

func (c *caPool) load() (*x509.CertPool, error) {
	pem, err := os.ReadFile(c.file)
	if err != nil {
		return nil, fmt.Errorf("probe agents' CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("probe agents' CA: " + c.file + " holds no PEM certificate")
	}
	c.mu.Lock()
	c.pool, c.at = pool, time.Now()
	c.mu.Unlock()
	return pool, nil
}

// get returns the pool, reading the file again when it is older than caReload; a
// failed read keeps the previous pool (a Secret volume is swapped atomically, but
// an operator's file may be half written).
func (c *caPool) get() (*x509.CertPool, error) {
	c.mu.Lock()
	pool, stale := c.pool, time.Since(c.at) > caReload
	if stale {
		c.at = time.Now()
	}
	c.mu.Unlock()
	if stale {
		if p, err := c.load(); err == nil {
			return p, nil
		}
	}
	return pool, nil
}

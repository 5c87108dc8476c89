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

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/certreload"
)

// caReload is how often the CA file is read again: the chart mounts it from a
// Secret, which changes in place when the certificates are renewed.
const caReload = time.Minute

// AgentClient returns the HTTP client the controller calls the agents with when
// they share one certificate: TLS verified against the CA in caFile only (not the
// system roots; read again every minute), with serverName as the name the agents'
// certificate must carry (empty: the host of the URL). The chart's shared
// certificate is for the name of the agents' Service, reached at each pod's
// address, so serverName is that name.
func AgentClient(caFile, serverName string) (*http.Client, error) {
	ca, err := loadCA(caFile)
	if err != nil {
		return nil, err
	}
	tr := agentTransport()
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		name := serverName
		if name == "" {
			var err error
			if name, _, err = net.SplitHostPort(addr); err != nil {
				return nil, err
			}
		}
		return dialTLS(ctx, ca, name, network, addr)
	}
	return &http.Client{Transport: tr}, nil
}

// NodeAgentClient returns the HTTP client the controller calls the agents with when
// each holds a certificate of its own node (agentcerts): TLS verified against the
// CA in caFile only, for the name agentapi.NodeCertName of the node the call is
// for. So the agent of another node, whose key a node's root could have taken,
// fails the handshake and never sees the token. The node comes from the
// Dispatcher (each call of an agent carries it); a request without one is refused.
// Each request has a connection of its own: a pooled connection, verified for one
// node, is never reused for another at the same address.
func NodeAgentClient(caFile string) (*http.Client, error) {
	ca, err := loadCA(caFile)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: nodeTransport{ca: ca}}, nil
}

// nodeTransport dials each request's agent for the name of its node.
type nodeTransport struct {
	ca *certreload.Value[*x509.CertPool]
}

func (t nodeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	node, ok := req.Context().Value(nodeKey{}).(string)
	if !ok || node == "" {
		return nil, errors.New("probe agent call without its node: the agent's certificate cannot be checked, nothing is sent")
	}
	tr := agentTransport()
	tr.DisableKeepAlives = true
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialTLS(ctx, t.ca, agentapi.NodeCertName(node), network, addr)
	}
	return tr.RoundTrip(req)
}

// nodeKey carries, in a request's context, the node whose agent it is for.
type nodeKey struct{}

// forNode returns client, with the node of its calls in each request's context.
func forNode(client *http.Client, node string) *http.Client {
	c := *client
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = nodeBound{node: node, base: base}
	return &c
}

type nodeBound struct {
	node string
	base http.RoundTripper
}

func (b nodeBound) RoundTrip(req *http.Request) (*http.Response, error) {
	return b.base.RoundTrip(req.WithContext(context.WithValue(req.Context(), nodeKey{}, b.node)))
}

func loadCA(caFile string) (*certreload.Value[*x509.CertPool], error) {
	return certreload.Load(caReload, func() (*x509.CertPool, error) {
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
}

func agentTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// No proxy: the agents are reached directly at their pods' addresses.
	tr.Proxy = nil
	tr.ForceAttemptHTTP2 = false
	return tr
}

var agentDialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}

func dialTLS(ctx context.Context, ca *certreload.Value[*x509.CertPool], name, network, addr string) (net.Conn, error) {
	d := tls.Dialer{NetDialer: agentDialer, Config: &tls.Config{RootCAs: ca.Get(), ServerName: name, MinVersion: tls.VersionTLS12}}
	return d.DialContext(ctx, network, addr)
}

package agent

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
)

// NodeCertificate keeps the agent's own serving certificate for node, obtained
// through the Kubernetes CSR API from the controller (signer
// agentapi.SignerName): client-go's certificate manager, the kubelet's, generates
// the key here (it never leaves the node), asks for a certificate naming
// agentapi.NodeCertName(node), waits for it, and renews it with a new key at 70 to
// 90% of its lifetime. Key and certificate are kept in dir, so a restarted agent
// serves them again at once. Call Start; ManagedTLS serves what it holds.
func NodeCertificate(client kubernetes.Interface, node, dir string, log *slog.Logger) (certificate.Manager, error) {
	if node == "" || dir == "" {
		return nil, errors.New("node certificate: node and directory are required")
	}
	store, err := certificate.NewFileStore("probe-agent-server", dir, dir, "", "")
	if err != nil {
		return nil, fmt.Errorf("node certificate store %s: %w", dir, err)
	}
	name := agentapi.NodeCertName(node)
	return certificate.NewManager(&certificate.Config{
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		Template:         &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name}},
		SignerName:       agentapi.SignerName,
		Usages:           agentapi.NodeCertUsages,
		CertificateStore: store,
		Name:             "probe-agent serving certificate",
		Logf:             func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...), "name", name) },
	})
}

// ManagedTLS serves the certificate m holds, TLS 1.2 or later; until it holds one,
// every handshake fails (the agent is not ready, and no caller's token reaches it).
func ManagedTLS(m certificate.Manager) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := m.Current(); c != nil {
			return c, nil
		}
		return nil, errors.New("no serving certificate yet: the node's certificate request is not signed")
	}}
}

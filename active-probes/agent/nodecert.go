package agent

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
)

// MinNodeCertLifetime is the shortest lifetime an agent may ask for: the CSR API
// refuses a spec.expirationSeconds under ten minutes.
const MinNodeCertLifetime = 10 * time.Minute

// NodeCertRequest says where the agent's certificate comes from.
type NodeCertRequest struct {
	// SignerName is the CSR's spec.signerName: agentapi.SignerName (the controller
	// approves and signs), or an external signer the controller only approves for,
	// such as cert-manager's issuers.cert-manager.io/<namespace>.<issuer> or
	// clusterissuers.cert-manager.io/<issuer>. Empty: agentapi.SignerName.
	SignerName string
	// Lifetime asked for (spec.expirationSeconds); zero leaves it to the signer.
	// cert-manager issues 90 days unless asked, so the chart asks.
	Lifetime time.Duration
}

// NodeCertificate keeps the agent's own serving certificate for node, obtained
// through the Kubernetes CSR API from the controller (signer agentapi.SignerName);
// see RequestNodeCertificate.
func NodeCertificate(client kubernetes.Interface, node, dir string, log *slog.Logger) (certificate.Manager, error) {
	return RequestNodeCertificate(client, node, dir, NodeCertRequest{}, log)
}

// RequestNodeCertificate keeps the agent's own serving certificate for node,
// obtained through the Kubernetes CSR API from req's signer: client-go's
// certificate manager, the kubelet's, generates the key here (it never leaves the
// node), asks for a certificate naming agentapi.NodeCertName(node), waits for it,
// and renews it with a new key at 70 to 90% of its lifetime. Key and certificate
// are kept in dir, so a restarted agent serves them again at once. Call Start;
// ManagedTLS serves what it holds.
func RequestNodeCertificate(client kubernetes.Interface, node, dir string, req NodeCertRequest, log *slog.Logger) (certificate.Manager, error) {
	if node == "" || dir == "" {
		return nil, errors.New("node certificate: node and directory are required")
	}
	if req.SignerName == "" {
		req.SignerName = agentapi.SignerName
	}
	var lifetime *time.Duration
	if req.Lifetime != 0 {
		if req.Lifetime < MinNodeCertLifetime {
			return nil, fmt.Errorf("node certificate lifetime %s: want at least %s", req.Lifetime, MinNodeCertLifetime)
		}
		lifetime = &req.Lifetime
	}
	store, err := certificate.NewFileStore("probe-agent-server", dir, dir, "", "")
	if err != nil {
		return nil, fmt.Errorf("node certificate store %s: %w", dir, err)
	}
	name := agentapi.NodeCertName(node)
	return certificate.NewManager(&certificate.Config{
		ClientsetFn:                  func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		Template:                     &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name}},
		SignerName:                   req.SignerName,
		Usages:                       agentapi.NodeCertUsages,
		RequestedCertificateLifetime: lifetime,
		CertificateStore:             store,
		Name:                         "probe-agent serving certificate",
		Logf: func(format string, args ...any) {
			log.Info(fmt.Sprintf(format, args...), "name", name, "signer", req.SignerName)
		},
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

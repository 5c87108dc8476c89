package agentapi

import (
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// The agents' per-node serving certificates (docs/security.md, "Per-node agent
// certificates"): each agent asks the Kubernetes CSR API for a certificate of its own
// node, the controller approves and signs it, and the controller accepts an agent only
// when its certificate names the node it means to call. Agent and controller both
// take the signer and the form of the name from here.
const (
	// SignerName is the CSR signer of the agents' certificates: the controller
	// approves and signs the CSRs of this signer only.
	SignerName = "faultline.io/probe-agent"

	// nodeCertSuffix follows the node's name in its agent's certificate. It is
	// under faultline.io, which no cluster DNS serves, so the name identifies a node
	// and is never resolved.
	nodeCertSuffix = ".node.probe-agent.faultline.io"
)

// NodeCertUsages are the key usages of an agent's CSR, and the only ones the
// controller signs: a TLS server certificate (an ECDSA key never enciphers, but
// client-go's CSR requests list key encipherment for every serving key).
var NodeCertUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
}

// NodeCertName is the one DNS name (SAN and common name) of the certificate of the
// agent on node: <node>.node.probe-agent.faultline.io.
func NodeCertName(node string) string { return node + nodeCertSuffix }

// NodeOfCertName returns the node a certificate name stands for, and false when the
// name is not of that form.
func NodeOfCertName(name string) (string, bool) {
	node, ok := strings.CutSuffix(name, nodeCertSuffix)
	return node, ok && node != ""
}
